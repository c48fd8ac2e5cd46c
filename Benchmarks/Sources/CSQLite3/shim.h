#include <sqlite3.h>

// SQLITE_STATIC is a macro over a cast that Swift cannot import: a null destructor tells SQLite the
// bound bytes stay valid until the statement is reset, so it does not copy them.
static inline sqlite3_destructor_type settee_sqlite_static(void) { return (sqlite3_destructor_type)0; }
