// POST /v1/embeddings through the real HTTP server over a scripted engine: OpenAI's shape
// for every input form, base64, dimensions, normalize, usage, the errors (each a 400 in
// OpenAI's shape naming the field), and --task routing. Then --pooling and the folder's
// sentence-transformers files (common/pooling_config.h): each mode read from
// 1_Pooling/config.json through modules.json, the flag winning, and the folders tandem
// would serve other vectors for refused naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "../test_server.h"
#include "core/error.h"
#include "server/common/pooling_config.h"
#include "server/openai/embeddings_response.h"

namespace tandem::server::testing {
namespace embeddings_test {

// The scripted engine's "pooled vector" of a prompt: [size, first id, 3, -4] (hidden 4).
std::vector<float> fake_vector(const GenerationRequest& r) {
  return {float(r.prompt.size()), float(r.prompt[0]), 3.f, -4.f};
}

class EmbeddingsHttp : public ::testing::Test {
 protected:
  explicit EmbeddingsHttp(ServerOptions options = {}) : server_(options, /*ready=*/false) {
    server_.engine.info().hidden_size = 4;
    server_.engine.script = [](int, const GenerationRequest& r) {
      StreamChunk c = final_chunk(FinishReason::Length, int(r.prompt.size()), 0);
      c.embedding = fake_vector(r);
      return std::vector<StreamChunk>{c};
    };
    server_.make_ready();
  }
  HttpReply embed(Json body) {
    if (!body.contains("model")) body["model"] = "test-model";
    return server_.post("/v1/embeddings", body);
  }
  TestServer server_;
};

std::vector<float> floats_of(const Json& embedding) {
  std::vector<float> out;
  for (const Json& v : embedding) out.push_back(v.get<float>());
  return out;
}

std::vector<float> normalized(std::vector<float> v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  for (float& x : v) x = float(x / std::sqrt(s));
  return v;
}

TEST_F(EmbeddingsHttp, AStringIsOneNormalizedVectorInOpenAIsShape) {
  HttpReply r = embed({{"input", "Hello there"}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "test-model");
  EXPECT_EQ(j["id"].get<std::string>().rfind("embd-", 0), 0u);
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const std::vector<GenerationRequest> sent = server_.engine.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].max_tokens, 0);
  EXPECT_EQ(sent[0].pooling, Pooling::Last);
  const std::vector<float> want = normalized(fake_vector(sent[0]));
  const std::vector<float> got = floats_of(j["data"][0]["embedding"]);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < 4; i++) EXPECT_FLOAT_EQ(got[i], want[i]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], int(sent[0].prompt.size()));
  EXPECT_EQ(j["usage"]["total_tokens"], int(sent[0].prompt.size()));
}

TEST_F(EmbeddingsHttp, EveryInputFormIsAnsweredInOrder) {
  HttpReply ids = embed({{"input", Json::parse("[7, 8, 9]")}});
  ASSERT_EQ(ids.status, 200) << ids.body;
  EXPECT_EQ(server_.engine.requests().back().prompt, (std::vector<int32_t>{7, 8, 9}));
  HttpReply lists =
      embed({{"input", Json::parse("[[5], [6, 6], [7, 7, 7]]")}, {"normalize", false}});
  ASSERT_EQ(lists.status, 200) << lists.body;
  Json j = lists.json();
  ASSERT_EQ(j["data"].size(), 3u);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(j["data"][i]["index"], i);
    EXPECT_EQ(floats_of(j["data"][i]["embedding"]),
              (std::vector<float>{float(i + 1), float(i + 5), 3.f, -4.f}));
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);
  HttpReply texts = embed({{"input", {"one", "two words", "three"}}});
  ASSERT_EQ(texts.status, 200) << texts.body;
  EXPECT_EQ(texts.json()["data"].size(), 3u);
}

TEST_F(EmbeddingsHttp, Base64IsTheLittleEndianFloatsOfTheSameVector) {
  Json floats = embed({{"input", Json::parse("[[4, 5, 6]]")}}).json();
  HttpReply r = embed({{"input", Json::parse("[[4, 5, 6]]")}, {"encoding_format", "base64"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = r.json()["data"][0]["embedding"].get<std::string>();
  // Decoded here with a table of its own, not the server's encoder.
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : text) {
    if (ch == '=') break;
    const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    acc = (acc << 6) | uint32_t(std::strchr(table, ch) - table);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += char((acc >> bits) & 0xff);
    }
  }
  ASSERT_EQ(bytes.size(), 16u);
  std::vector<float> decoded(4);
  std::memcpy(decoded.data(), bytes.data(), 16);
  EXPECT_EQ(decoded, floats_of(floats["data"][0]["embedding"]));
}

TEST_F(EmbeddingsHttp, DimensionsTruncateThenRenormalize) {
  HttpReply r = embed({{"input", Json::parse("[[1, 2]]")}, {"dimensions", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<float> got = floats_of(r.json()["data"][0]["embedding"]);
  const std::vector<float> want = normalized({2.f, 1.f});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FLOAT_EQ(got[0], want[0]);
  EXPECT_FLOAT_EQ(got[1], want[1]);
  HttpReply raw =
      embed({{"input", Json::parse("[[1, 2]]")}, {"dimensions", 3}, {"normalize", false}});
  EXPECT_EQ(floats_of(raw.json()["data"][0]["embedding"]), (std::vector<float>{2.f, 1.f, 3.f}));
}

void expect_400(const HttpReply& r, const std::string& param, const std::string& words) {
  ASSERT_EQ(r.status, 400) << r.body;
  Json e = r.json()["error"];
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], param) << r.body;
  EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << r.body;
}

TEST_F(EmbeddingsHttp, BadRequestsAre400sNamingTheField) {
  expect_400(embed(Json::object()), "input", "input");
  expect_400(embed({{"input", Json::array()}}), "input", "must not be empty");
  expect_400(embed({{"input", ""}}), "input", "empty string");
  expect_400(embed({{"input", {"a", ""}}}), "input", "input[1]");
  expect_400(embed({{"input", Json::parse("[[]]")}}), "input", "empty list");
  expect_400(embed({{"input", Json::parse("[1, 600]")}}), "input", "out of the vocabulary");
  expect_400(embed({{"input", Json::parse(R"(["a", [1]])")}}), "input", "only strings");
  expect_400(embed({{"input", "a"}, {"encoding_format", "int8"}}), "encoding_format", "base64");
  expect_400(embed({{"input", "a"}, {"dimensions", 5}}), "dimensions", "hidden size");
  expect_400(embed({{"input", "a"}, {"dimensions", 0}}), "dimensions", "dimensions");
  expect_400(embed({{"input", "a"}, {"normalize", "yes"}}), "normalize", "normalize");
  expect_400(embed({{"input", std::vector<int32_t>(257, 3)}}), "input", "maximum context length");
  EXPECT_EQ(embed({{"input", "a"}, {"model", "other"}}).status, 404);
  EXPECT_TRUE(server_.engine.requests().empty());  // nothing reached the engine
}

TEST_F(EmbeddingsHttp, TruncatePromptTokensKeepsTheLastOnes) {
  HttpReply r = embed({{"input", std::vector<int32_t>(300, 3)}, {"truncate_prompt_tokens", 10}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server_.engine.requests().back().prompt.size(), 10u);
  HttpReply context =
      embed({{"input", std::vector<int32_t>(300, 3)}, {"truncate_prompt_tokens", -1}});
  ASSERT_EQ(context.status, 200) << context.body;
  EXPECT_EQ(server_.engine.requests().back().prompt.size(), 256u);
}

TEST_F(EmbeddingsHttp, AnEngineRefusalIsA400) {
  server_.engine.script = [](int, const GenerationRequest&) {
    return std::vector<StreamChunk>{error_chunk("unknown LoRA adapter 'x'")};
  };
  HttpReply r = embed({{"input", "a"}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("unknown LoRA adapter"), std::string::npos);
}

struct LimitedServer : EmbeddingsHttp {
  static ServerOptions options() {
    ServerOptions o;
    o.limits.request.max_sequences = 2;
    o.limits.request.max_prompt_tokens = 5;
    return o;
  }
  LimitedServer() : EmbeddingsHttp(options()) {}
};

TEST_F(LimitedServer, TooManyInputsOrTokensAreRefusedNamingTheFlag) {
  expect_400(embed({{"input", {"a", "b", "c"}}}), "input", "--max-request-sequences");
  expect_400(embed({{"input", Json::parse("[[1, 2, 3], [4, 5, 6]]")}}), "input",
             "--max-request-tokens");
  EXPECT_EQ(embed({{"input", Json::parse("[[1, 2], [4, 5, 6]]")}}).status, 200);
}

struct EmbedOnlyServer : EmbeddingsHttp {
  static ServerOptions options(ServeTask task) {
    ServerOptions o;
    o.task = task;
    return o;
  }
  EmbedOnlyServer() : EmbeddingsHttp(options(ServeTask::Embed)) {}
};

TEST_F(EmbedOnlyServer, GenerationRoutesAre404sNamingTheTask) {
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/responses"}) {
    HttpReply r = server_.post(path, chat_body("hi"));
    ASSERT_EQ(r.status, 404) << path;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("--task embed"),
              std::string::npos);
  }
  HttpReply messages = server_.post("/v1/messages", chat_body("hi", {{"max_tokens", 4}}));
  ASSERT_EQ(messages.status, 404);
  EXPECT_EQ(messages.json()["type"], "error");  // Anthropic's shape on its route
  EXPECT_EQ(embed({{"input", "still served"}}).status, 200);
}

struct GenerateOnlyServer : EmbeddingsHttp {
  GenerateOnlyServer() : EmbeddingsHttp(EmbedOnlyServer::options(ServeTask::Generate)) {}
};

TEST_F(GenerateOnlyServer, EmbeddingsAre404NamingTheTask) {
  HttpReply r = embed({{"input", "a"}});
  ASSERT_EQ(r.status, 404);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("--task generate"),
            std::string::npos);
}

TEST(EmbeddingsFormat, Base64OfKnownFloatsAndNonFiniteVectors) {
  EXPECT_EQ(base64_f32(std::vector<float>{1.f}), "AACAPw==");
  EXPECT_EQ(base64_f32(std::vector<float>{1.f, -2.f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_f32(std::vector<float>{}), "");
  EXPECT_EQ(client_embedding({0.f, 0.f}, std::nullopt, true), (std::vector<float>{0.f, 0.f}));
  EXPECT_EQ(client_embedding({3.f, 4.f, 12.f}, 2, true), (std::vector<float>{0.6f, 0.8f}));
  EXPECT_THROW(client_embedding({1.f, NAN}, std::nullopt, true), ApiError);
}

}  // namespace embeddings_test
}  // namespace tandem::server::testing

namespace tandem::server {
namespace embeddings_test {

namespace fs = std::filesystem;

class PoolingConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_pooling_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_ / "1_Pooling");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  void modules(const std::string& after_pooling = "") {
    write(
        "modules.json",
        R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
              {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})" +
            after_pooling + "]");
  }
  void pooling(const std::string& mode, const std::string& extra = "") {
    write("1_Pooling/config.json",
          R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false,
          "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false, ")" +
              mode + R"(": true, "include_prompt": true)" + extra + "}");
  }
  std::string error_of(const std::string& flag = "auto") {
    try {
      choose_pooling(dir_, flag);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(PoolingConfig, EachModeIsReadThroughModulesJson) {
  modules();
  for (auto [mode, want] : {std::pair{"pooling_mode_lasttoken", Pooling::Last},
                            {"pooling_mode_mean_tokens", Pooling::Mean},
                            {"pooling_mode_cls_token", Pooling::Cls}}) {
    pooling(mode);
    PoolingChoice c = choose_pooling(dir_, "auto");
    EXPECT_EQ(c.pooling, want) << mode;
    EXPECT_NE(c.source, "default");
  }
}

TEST_F(PoolingConfig, TheFlagWinsAndAFolderWithoutFilesDefaultsToLast) {
  modules(
      R"(, {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})");
  pooling("pooling_mode_mean_tokens");
  EXPECT_EQ(choose_pooling(dir_, "cls").pooling, Pooling::Cls);
  EXPECT_EQ(choose_pooling(dir_, "cls").source, "--pooling");
  fs::remove_all(dir_ / "1_Pooling");
  fs::remove(dir_ / "modules.json");
  EXPECT_EQ(choose_pooling(dir_, "auto").pooling, Pooling::Last);
  EXPECT_EQ(choose_pooling(dir_, "auto").source, "default");
  EXPECT_NE(error_of("max").find("--pooling 'max'"), std::string::npos);
}

TEST_F(PoolingConfig, FoldersThatWouldGetOtherVectorsAreRefusedNamingTheFile) {
  modules();
  pooling("pooling_mode_max_tokens");
  EXPECT_NE(error_of().find("pooling_mode_max_tokens"), std::string::npos);
  EXPECT_NE(error_of().find("1_Pooling"), std::string::npos);
  pooling("pooling_mode_lasttoken", R"(, "pooling_mode_mean_sqrt_len_tokens": true)");
  EXPECT_NE(error_of().find("pooling_mode_mean_sqrt_len_tokens"), std::string::npos);
  write("1_Pooling/config.json",
        R"({"pooling_mode_lasttoken": true, "pooling_mode_cls_token": true})");
  EXPECT_NE(error_of().find("several"), std::string::npos);
  write("1_Pooling/config.json", R"({"pooling_mode_lasttoken": true, "include_prompt": false})");
  EXPECT_NE(error_of().find("include_prompt"), std::string::npos);
  pooling("pooling_mode_lasttoken");
  modules(
      R"(, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})");
  EXPECT_NE(error_of().find("2_Dense"), std::string::npos);
  EXPECT_NE(error_of("last").find("2_Dense"), std::string::npos);  // the flag cannot fix that
  write("modules.json", "{not json");
  EXPECT_NE(error_of().find("modules.json"), std::string::npos);
}

}  // namespace embeddings_test
}  // namespace tandem::server
