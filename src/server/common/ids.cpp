#include "server/common/ids.h"

#include <chrono>
#include <random>

namespace tandem::server {

std::string random_id(std::string_view prefix) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tandem::server
