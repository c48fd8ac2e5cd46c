#ifndef SETTEE_CJAVASCRIPTCORE_SHIM_H
#define SETTEE_CJAVASCRIPTCORE_SHIM_H

// JavaScriptCore's C API, for the sync server's functions (the sync function, design documents'
// filters and validate_doc_update): Debian's libjavascriptcoregtk-4.1 on Linux, the system framework
// on Apple platforms. The library is linked through pkg-config on Linux (no `link` line in the module
// map, so an Apple build links the framework instead of looking for the GTK library).

#include <stdbool.h>
#include <JavaScriptCore/JavaScript.h>

#ifdef __cplusplus
extern "C" {
#endif

// The execution time limit, which stops a function that runs too long (`while (true) {}`). Both
// libraries export these functions, but neither ships the header that declares them
// (JSContextRefPrivate.h is private to WebKit, and Debian's -dev package leaves it out), so they are
// declared here, with the signatures the library exports.
//
// The limit applies to every context of the group, and to each entry into the VM separately; it
// counts the running thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time. When a script has
// used `limit` seconds, `callback` is called on the thread running it; returning true
// terminates the script (an uncatchable exception). (With WebKitGTK 2.50, returning false lets
// the script run on with no further call unless the callback sets the limit again before it
// returns, which arms the next call: the server's watchdog does so. A NULL callback terminated
// only after about twice the limit.) Set the limit before any script runs in the group: code
// compiled earlier may lack the checks the limit needs.
typedef bool (*JSShouldTerminateCallback)(JSContextRef ctx, void *context);
void JSContextGroupSetExecutionTimeLimit(JSContextGroupRef group, double limit,
                                         JSShouldTerminateCallback callback, void *context);
void JSContextGroupClearExecutionTimeLimit(JSContextGroupRef group);

#ifdef __cplusplus
}
#endif

#endif
