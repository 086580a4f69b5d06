// httplib's Request, Response and DataSink: the types route handlers read and fill. The
// transport around them is tandem's own (transport.h); only these types and the client
// (tests, `tandem bench`) come from cpp-httplib.
//
// The library is built with OpenSSL/zlib/brotli support and its class layouts depend on
// those macros: always include httplib through this header.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
