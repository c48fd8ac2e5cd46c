#include <stdlib.h>
#include "ScriptOptions.h"

static int options_set = 0;

/// JavaScriptCore stops a loop already running as compiled code only with polling traps (its
/// signal-based traps sometimes never land); it reads its options from the environment when its
/// first VM starts. Run by the loader, single-threaded; an explicit setting wins.
__attribute__((constructor)) static void settee_set_script_options(void) {
    setenv("JSC_usePollingTraps", "1", 0);
    options_set = 1;
}

int settee_script_options_set(void) { return options_set; }
