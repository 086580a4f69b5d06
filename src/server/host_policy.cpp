#include "server/host_policy.h"

#include "core/ascii.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tandem::server {
namespace {

bool is_ip_literal(const std::string& name) {
  in6_addr v6;
  in_addr v4;
  return inet_pton(AF_INET, name.c_str(), &v4) == 1 || inet_pton(AF_INET6, name.c_str(), &v6) == 1;
}

std::optional<std::string> machine_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return std::nullopt;
  return ascii_lower(buf);
}

}  // namespace

std::string host_name_of(std::string_view host_header) {
  if (!host_header.empty() && host_header.front() == '[') {
    size_t close = host_header.find(']');
    return ascii_lower(host_header.substr(
        1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  size_t colon = host_header.rfind(':');
  if (colon != std::string_view::npos && host_header.find(':') == colon)
    host_header = host_header.substr(0, colon);  // one colon: a port (two or more: bare IPv6)
  std::string name = ascii_lower(host_header);
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is localhost
  return name;
}

HostPolicy HostPolicy::create(const std::string& bind_host,
                              const std::optional<std::vector<std::string>>& allowed,
                              bool has_api_key) {
  HostPolicy p;
  if (allowed) {
    for (const std::string& entry : *allowed) {
      std::string e = ascii_lower(entry);
      if (e == "*") p.any_ = true;
      if (e.size() > 1 && e.front() == '.') {
        p.suffixes_.push_back(e);
      } else if (!e.empty()) {
        p.names_.push_back(host_name_of(e));
      }
    }
    return p;
  }
  if (has_api_key) {
    p.any_ = true;
    return p;
  }
  p.default_rule_ = true;
  p.names_.push_back("localhost");
  if (auto name = machine_name()) p.names_.push_back(*name);
  std::string bind = host_name_of(bind_host);
  if (!bind.empty() && !is_ip_literal(bind)) p.names_.push_back(bind);
  return p;
}

bool HostPolicy::allows(std::string_view host_header) const {
  if (any_ || host_header.empty()) return true;
  std::string name = host_name_of(host_header);
  if (default_rule_ && (is_ip_literal(name) || name.ends_with(".localhost"))) return true;
  if (std::find(names_.begin(), names_.end(), name) != names_.end()) return true;
  return std::any_of(suffixes_.begin(), suffixes_.end(), [&](const std::string& s) {
    return name.ends_with(s) || name == s.substr(1);
  });
}

std::string HostPolicy::describe() const {
  std::vector<std::string> parts;
  if (default_rule_) parts.push_back("IP addresses");
  for (const std::string& n : names_) parts.push_back(n);
  for (const std::string& s : suffixes_) parts.push_back("*" + s);
  if (default_rule_) parts.push_back("*.localhost");
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace tandem::server
