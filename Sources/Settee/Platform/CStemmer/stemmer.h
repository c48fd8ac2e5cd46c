#ifndef SETTEE_STEMMER_H
#define SETTEE_STEMMER_H

// Snowball's stemmers, as Debian's libstemmer-dev installs them (Linux and Android): the C half
// of Sources/Settee/Platform/SnowballStemmer.swift, which alone imports this module.
#include <libstemmer.h>

#endif
