#include "oracle_fixture.h"

#include <cmath>
#include <cstring>

#include "loader/safetensors.h"

namespace tandem::test {

std::filesystem::path oracle_dir(const std::string& arch) {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / arch;
}

std::vector<int32_t> ids_of(const Tensor& t) {
  const int32_t* p = t.ptr<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

std::vector<OraclePrompt> load_oracle(const std::string& arch) {
  auto file = SafetensorsFile::open(oracle_dir(arch) / "golden.safetensors");
  std::vector<OraclePrompt> out;
  for (int i = 0; file->has("prompt." + std::to_string(i)); i++) {
    std::string s = std::to_string(i);
    OraclePrompt p;
    p.prompt = ids_of(file->tensor("prompt." + s));
    p.greedy = ids_of(file->tensor("greedy." + s));
    p.batch_greedy = ids_of(file->tensor("batch_greedy." + s));
    Tensor l = file->tensor("logits." + s);
    p.logits = Tensor::empty_host(DType::F32, l.shape);
    std::memcpy(p.logits.data, l.data, l.nbytes());
    out.push_back(std::move(p));
  }
  return out;
}

double relative_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace tandem::test
