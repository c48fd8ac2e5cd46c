// SQLite, the independent implementation the query tests compare Settee's results with.
#include <sqlite3.h>
