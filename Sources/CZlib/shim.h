// Debian's zlib1g-dev: the server decompresses the gzip-encoded attachments CouchDB's replicator sends.
#include <zlib.h>
