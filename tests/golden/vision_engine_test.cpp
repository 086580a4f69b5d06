// Images through the engine (issue 41): the prefix cache mixes each image's content hash
// into the blocks it overlaps — the same image hits (and the output is unchanged), another
// image behind the same placeholder tokens hits at most the blocks before it, and a hit
// never ends inside an image; image rows and text rows share steps; bad images are refused
// at submit with the reason, and the engine goes on.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "vision_fixture.h"

namespace tandem::test {
namespace vision_engine_test {

struct Reply {
  std::vector<int32_t> tokens;
  int cached_tokens = -1;
  std::optional<FinishReason> finish;
  std::string error;
};

Reply run(Engine& engine, const GenerationRequest& r) {
  auto stream = engine.submit(r);
  engine.run_until_idle();
  Reply out;
  while (auto c = stream->pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) out.tokens.push_back(t.token);
    if (c->finish) {
      out.finish = c->finish;
      out.cached_tokens = c->cached_tokens;
      out.error = c->error;
    }
  }
  return out;
}

struct Loaded {
  std::unique_ptr<Engine> engine;
  std::vector<VisionCase> cases;
};

Loaded load(const std::string& folder, EngineConfig config = {}) {
  auto backend = make_cpu_backend();
  auto model = load_model(vision_oracle_dir(folder), *backend);
  Loaded l;
  l.cases = load_vision_oracle(folder, model->vision_spec().image_token_id);
  l.engine = std::make_unique<Engine>(make_executor(std::move(backend), std::move(model)), nullptr,
                                      config);
  return l;
}

class VisionPrefixCache : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionPrefixCache, SameImageHitsAnotherImageNever) {
  Loaded l = load(GetParam());
  const VisionCase& c = l.cases[0];  // one image after a short text prefix
  ASSERT_EQ(c.media.size(), 1u);
  const MediaSpan span = c.media[0];
  const GenerationRequest first = vision_request(c, 4);
  const Reply a = run(*l.engine, first);
  ASSERT_EQ(a.tokens, std::vector<int32_t>(c.greedy.begin(), c.greedy.begin() + 4));
  EXPECT_EQ(a.cached_tokens, 0);

  const Reply again = run(*l.engine, first);  // the same image: the blocks past it hit
  EXPECT_EQ(again.tokens, a.tokens);
  EXPECT_GE(again.cached_tokens, span.start + span.length);

  GenerationRequest other = first;  // the same tokens, other pixels
  other.media[0].image = altered_image(*span.image, 0.25f);
  const Reply b = run(*l.engine, other);
  EXPECT_LE(b.cached_tokens, span.start)
      << "a block holding the image was reused for another image";
  EXPECT_EQ(b.cached_tokens % 16, 0);

  const Reply back = run(*l.engine, first);  // both images are cached now, side by side
  EXPECT_EQ(back.tokens, a.tokens);
  EXPECT_GE(back.cached_tokens, span.start + span.length);
  EXPECT_EQ(l.engine->kv_blocks().num_used(), 0);
}

TEST_P(VisionPrefixCache, AHitNeverEndsInsideAnImage) {
  Loaded l = load(GetParam());
  for (const VisionCase& c : l.cases) {
    run(*l.engine, vision_request(c, 2));
    // The same prompt cut right after a block boundary inside each image: what hits must
    // end before the image or after it.
    for (const MediaSpan& m : c.media) {
      const int boundary = (m.start / 16 + 1) * 16;  // the first block boundary after the start
      if (boundary >= m.start + m.length) continue;
      GenerationRequest r = vision_request(c, 1);
      r.prompt.resize(size_t(m.start + m.length + 1));  // the image and its end marker
      r.media.clear();
      for (const MediaSpan& k : c.media)
        if (k.start + k.length <= int(r.prompt.size())) r.media.push_back(k);
      const Reply got = run(*l.engine, r);
      ASSERT_EQ(got.finish, FinishReason::Length) << got.error;
      EXPECT_TRUE(got.cached_tokens <= m.start || got.cached_tokens >= m.start + m.length)
          << "hit of " << got.cached_tokens << " tokens ends inside the image [" << m.start << ", "
          << m.start + m.length << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Folders, VisionPrefixCache,
                         ::testing::Values("gemma3_vision", "gemma4_vision_bidir",
                                           "gemma4_vision_causal"),
                         [](const auto& info) { return info.param; });

// Text rows and image rows in one batch: each returns what it returns alone.
TEST(VisionEngine, ImageAndTextRowsShareSteps) {
  EngineConfig config;
  config.scheduler.max_rows = 4;
  config.enable_prefix_caching = false;
  Loaded l = load("gemma4_vision_causal", config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  const std::vector<int> order = {4, 0, 4, 3, 2};
  for (int i : order) streams.push_back(l.engine->submit(vision_request(l.cases[size_t(i)], 16)));
  l.engine->run_until_idle();
  for (size_t k = 0; k < order.size(); k++) {
    std::vector<int32_t> got;
    while (auto c = streams[k]->pop(std::chrono::milliseconds(0)))
      for (auto& t : c->tokens) got.push_back(t.token);
    EXPECT_EQ(got, l.cases[size_t(order[k])].greedy) << "request " << k;
  }
}

TEST(VisionEngine, BadImagesAreRefusedAndTheEngineGoesOn) {
  Loaded l = load("gemma3_vision");
  const VisionCase& c = l.cases[0];
  auto refused = [&](GenerationRequest r, const std::string& why) {
    const Reply got = run(*l.engine, r);
    EXPECT_EQ(got.finish, FinishReason::Error) << why;
    EXPECT_NE(got.error.find(why), std::string::npos) << got.error;
  };
  GenerationRequest r = vision_request(c, 2);
  r.media[0].length -= 1;
  refused(r, "soft tokens");
  r = vision_request(c, 2);
  r.media[0].start -= 1;  // the span now covers a text token
  refused(r, "not the image token");
  r = vision_request(c, 2);
  auto small = std::make_shared<ImageInput>(*c.media[0].image);
  small->pixels = Tensor::empty_host(DType::F32, {3, 8, 8});
  r.media[0].image = small;
  refused(r, "must be [3, 64, 64]");
  r = vision_request(c, 2);
  r.media.clear();  // placeholders without their image
  refused(r, "image tokens");
  r = vision_request(c, 2);
  r.media.push_back(r.media[0]);  // the same span twice
  refused(r, "out of order");
  const Reply ok = run(*l.engine, vision_request(c, 2));
  EXPECT_EQ(ok.tokens, std::vector<int32_t>(c.greedy.begin(), c.greedy.begin() + 2));
  EXPECT_EQ(l.engine->kv_blocks().num_used(), 0);
}

}  // namespace vision_engine_test
}  // namespace tandem::test
