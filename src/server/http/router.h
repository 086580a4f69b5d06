// Routes: a method and a path pattern (a regex, matched whole, as httplib's) to a handler,
// and the lane it runs on.
#pragma once

#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "server/http/httplib_types.h"

namespace tandem::server::http {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

enum class Lane : uint8_t {
  Worker,  // a worker thread: may block (generation, streams), waits its turn when all are busy
  Probe,   // answered on the poller thread at once, never queued behind busy workers: for
           // cheap handlers that never block (/health, /metrics, /stats)
};

struct Route {
  std::string method;
  std::string pattern;
  std::regex regex;
  bool literal = false;  // the pattern has no regex syntax: compared as a string
  Handler handler;
  Lane lane = Lane::Worker;
};

class Router {
 public:
  void add(std::string method, std::string pattern, Handler handler, Lane lane);
  // The route for a method and path, or null.
  const Route* find(const std::string& method, const std::string& path) const;
  // find(), and the pattern's groups into req.matches (which refers into req.path: call it
  // on the Request the handler will get, after its last move).
  const Route* match(httplib::Request& req) const;

 private:
  std::vector<Route> routes_;
};

}  // namespace tandem::server::http
