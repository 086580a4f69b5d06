// The `tandem serve` flags of server/server_limits.h (and --allowed-hosts), registered in
// one call so that main.cpp carries one line for all of them.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "server/common/server_limits.h"

namespace tandem::cli {

void add_limit_flags(CLI::App& serve, server::ServerLimits& limits,
                     std::vector<std::string>& allowed_hosts);

// Throws tandem::Error naming the flag of a limit that makes no sense (0 threads, a depth
// past what the stack allows, ...).
void check_limits(const server::ServerLimits& limits);

}  // namespace tandem::cli
