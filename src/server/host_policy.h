// Which Host headers the server answers: the defence against DNS rebinding, where a web
// page the user visits resolves its own name to this server's address and reads the
// answers as same-origin.
//
// The rule: with --allowed-hosts, the names listed ("*" allows any; ".example.com" allows
// example.com and its subdomains). Without it, names that can only mean this machine —
// IP literals (a page cannot rebind an address), localhost and *.localhost, the machine's
// own host name, and the --host value when it is a name — and with --api-key no check at
// all (a browser page cannot send the key, and proxies forward arbitrary public names). A
// request without Host (HTTP/1.0) is answered. The port is not part of the check.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

class HostPolicy {
 public:
  // `allowed`: --allowed-hosts (nullopt: the default rule).
  static HostPolicy create(const std::string& bind_host,
                           const std::optional<std::vector<std::string>>& allowed,
                           bool has_api_key);

  bool allows(std::string_view host_header) const;
  // For the 403: what this server answers.
  std::string describe() const;

 private:
  bool any_ = false;                   // no check
  bool default_rule_ = false;          // IP literals and loopback names besides names_
  std::vector<std::string> names_;     // exact names, lower-case
  std::vector<std::string> suffixes_;  // ".example.com": the domain and its subdomains
};

// "Example.COM:8080" → "example.com"; "[::1]:80" → "::1".
std::string host_name_of(std::string_view host_header);

}  // namespace tandem::server
