#include "server/http/router.h"

namespace tandem::server::http {
namespace {

// libstdc++'s std::regex recurses once per character matched: longer paths never reach a
// pattern route (no route of ours takes one; the head limit alone would allow 64 KiB).
constexpr size_t kMaxPatternPath = 2048;

}  // namespace

void Router::add(std::string method, std::string pattern, Handler handler, Lane lane) {
  Route r;
  r.method = std::move(method);
  r.literal = pattern.find_first_of("()[]{}.*+?|^$\\") == std::string::npos;
  r.regex = std::regex(pattern);
  r.pattern = std::move(pattern);
  r.handler = std::move(handler);
  r.lane = lane;
  routes_.push_back(std::move(r));
}

const Route* Router::find(const std::string& method, const std::string& path) const {
  for (const Route& r : routes_) {
    if (r.method != method) continue;
    if (r.literal ? r.pattern == path
                  : path.size() <= kMaxPatternPath && std::regex_match(path, r.regex))
      return &r;
  }
  return nullptr;
}

const Route* Router::match(httplib::Request& req) const {
  const Route* r = find(req.method, req.path);
  if (r && !r->literal) std::regex_match(req.path, req.matches, r->regex);
  return r;
}

}  // namespace tandem::server::http
