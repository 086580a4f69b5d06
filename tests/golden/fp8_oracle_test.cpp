// The FP8 oracle (tests/data/oracle/fp8/<fixture>/, from ../shared/oracle/fp8): FP8
// checkpoints of the llama oracle with float64 logits of the declared W8A8 scheme. Every
// fixture folder there is checked the same way, so new fixtures need no code.
//
// The reference resolves exact e4m3 rounding ties by float64 noise (convert_golden.py
// says why), and one flipped activation moves a tiny random model's later logits by
// 1e-2..1e-1; tandem's f32 twin resolves them by its own. So the check is: every prompt
// within 1.5e-1 (a W8A16 implementation lands ~1e-1 off at every prompt of these
// fixtures; a wrong scale layout or block mapping is off by far more), and at least two
// prompts of each fixture within 1e-4, which only the exact W8A8 arithmetic reaches
// (~2e-7 measured; 2 of 5 per-channel and 3 of 5 block prompts meet no tie tandem
// resolves differently).
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/backend.h"
#include "engine/teacher_forcing.h"
#include "loader/safetensors.h"
#include "model/model.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace fp8_oracle_test {

std::vector<std::filesystem::path> fp8_fixtures() {
  std::vector<std::filesystem::path> dirs;
  for (auto& e : std::filesystem::directory_iterator(std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "fp8"))
    if (std::filesystem::exists(e.path() / "fp8_golden.safetensors")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(Fp8Oracle, CpuLogitsMatchTheDeclaredScheme) {
  const auto dirs = fp8_fixtures();
  ASSERT_GE(dirs.size(), 2u) << "the per-channel and block fixtures are in tests/data/oracle/fp8";
  for (const auto& dir : dirs) {
    auto backend = make_cpu_backend();
    auto model = load_model(dir, *backend);
    auto golden = SafetensorsFile::open(dir / "fp8_golden.safetensors");
    int prompts = 0, exact = 0;
    for (int i = 0; golden->has("ids." + std::to_string(i)); i++, prompts++) {
      const Tensor ids = golden->tensor("ids." + std::to_string(i));
      const Tensor want = golden->tensor("logits." + std::to_string(i));
      std::vector<int32_t> v(ids.ptr<int32_t>(), ids.ptr<int32_t>() + ids.numel());
      Tensor got = teacher_forced_logits(*model, *backend, v);
      ASSERT_EQ(got.numel(), want.numel()) << dir;
      const double err = relative_error(got.ptr<float>(), want.ptr<float>(), size_t(got.numel()));
      std::printf("%s prompt %d: rel err %.2e\n", dir.filename().c_str(), i, err);
      EXPECT_LE(err, 1.5e-1) << dir << " prompt " << i;
      exact += err <= 1e-4;
    }
    EXPECT_GE(prompts, 3) << dir;
    EXPECT_GE(exact, 2) << dir << ": prompts that agree exactly with the W8A8 reference";
  }
}

}  // namespace fp8_oracle_test
}  // namespace tandem::test
