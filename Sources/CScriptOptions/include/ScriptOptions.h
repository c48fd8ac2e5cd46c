#ifndef SETTEE_SCRIPT_OPTIONS_H
#define SETTEE_SCRIPT_OPTIONS_H

/// JavaScriptCore's options the server needs, set in the process's environment when the library
/// is loaded, before any thread runs (setting the environment later races with every thread that
/// reads it: a process launched meanwhile copies a freed array). Returns 1 once they are set;
/// calling it also keeps the loader from dropping this file.
int settee_script_options_set(void);

#endif
