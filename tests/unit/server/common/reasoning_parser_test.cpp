// The reasoning parsers (issue 43) on the real chat templates: which format `auto` picks,
// where a row starts given the rendered prompt (a block the template opened, thinking
// turned off by enable_thinking / thinking), and the split of outputs into reasoning and
// content, which must not depend on how the text was cut into stream chunks.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "server/common/answer_split.h"
#include "server/common/chat_prompt.h"
#include "server/common/reasoning_parser.h"
#include "server/openai/chat_messages.h"

namespace tandem::server {
namespace reasoning_parser_test {

std::string template_text(const std::string& name) {
  std::ifstream in(std::string(TANDEM_TEST_DATA "/chat_templates/") + name + ".jinja",
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The generation prompt of one user turn under `name`, with template kwargs.
std::string render_prompt(const std::string& name, const Json& kwargs) {
  nlohmann::json config = {{"chat_template", template_text(name)},
                           {"bos_token", "<s>"},
                           {"eos_token", "</s>"}};
  auto builder = ChatPromptBuilder::create(TokenizerConfig::parse(config, name),
                                           Tokenizer::load(TANDEM_TEST_DATA "/oracle/llama"));
  ChatPromptInput in;
  in.messages = normalize_openai_messages(Json::array({{{"role", "user"}, {"content", "Hi"}}}));
  in.template_kwargs = kwargs;
  in.now = "2026-11-29T12:00:00";
  return builder->render(in);
}

const ReasoningSyntax& think() {
  return reasoning_syntax(ReasoningFormat::Qwen3);
}
const ReasoningSyntax& gemma() {
  return reasoning_syntax(ReasoningFormat::Gemma4);
}

TEST(ReasoningFormats, NamesAndAutoDetection) {
  EXPECT_EQ(reasoning_format_named("deepseek_r1"), ReasoningFormat::DeepSeekR1);
  EXPECT_EQ(reasoning_format_named("glm45"), ReasoningFormat::Glm45);
  EXPECT_FALSE(reasoning_format_named("auto"));
  EXPECT_FALSE(reasoning_format_named("Qwen3"));
  const std::pair<const char*, std::optional<ReasoningFormat>> expected[] = {
      {"Qwen-Qwen3-0.6B", ReasoningFormat::Qwen3},
      {"Qwen3.5-4B", ReasoningFormat::Qwen3},
      {"Qwen-QwQ-32B", ReasoningFormat::Qwen3},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ReasoningFormat::DeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ReasoningFormat::DeepSeekR1},
      {"deepseek-ai-DeepSeek-V3.1", ReasoningFormat::DeepSeekR1},
      {"deepseek-ai-DeepSeek-V3.2", ReasoningFormat::DeepSeekR1},
      {"GLM-4.6", ReasoningFormat::Glm45},
      {"GLM-4.7-Flash", ReasoningFormat::Glm45},
      {"google-gemma-4-31B-it", ReasoningFormat::Gemma4},
      {"google-gemma-4-31B-it-interleaved", ReasoningFormat::Gemma4},
      // No thinking delimiters, or delimiters under role markers of no format here: off.
      {"Qwen-Qwen2.5-7B-Instruct", std::nullopt},
      {"meta-llama-Llama-3.1-8B-Instruct", std::nullopt},
      {"google-gemma-2-2b-it", std::nullopt},
      {"MiniMax-M2", std::nullopt},
      {"openai-gpt-oss-120b", std::nullopt},
  };
  for (const auto& [name, format] : expected)
    EXPECT_EQ(detect_reasoning_format(template_text(name)), format) << name;
  // Markers of two formats in one template: ambiguous, off.
  EXPECT_FALSE(detect_reasoning_format("<|im_start|><|assistant|></think>"));
}

// Where the rendered prompt leaves the row, template by template.
TEST(ReasoningFormats, ThinkingStartOnTheRealTemplates) {
  using S = ThinkingStart;
  const Json off = {{"enable_thinking", false}}, on = {{"enable_thinking", true}};
  struct Case {
    const char* name;
    Json kwargs;
    S start;
  };
  const Case cases[] = {
      {"Qwen-Qwen3-0.6B", Json::object(), S::MayOpen},  // the model opens <think> itself
      {"Qwen-Qwen3-0.6B", off, S::Closed},               // "<think>\n\n</think>\n\n"
      {"Qwen3.5-4B", Json::object(), S::Open},           // the template writes "<think>\n"
      {"Qwen3.5-4B", off, S::Closed},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", Json::object(), S::Open},
      // This published variant closes the block unless enable_thinking is set.
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", Json::object(), S::Closed},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", on, S::Open},
      {"deepseek-ai-DeepSeek-V3.1", Json::object(), S::Closed},  // "<think></think>"
      {"deepseek-ai-DeepSeek-V3.1", {{"thinking", true}}, S::Open},
      {"deepseek-ai-DeepSeek-V3.1", on, S::Open},
      {"deepseek-ai-DeepSeek-V3.2", Json::object(), S::Closed},
      {"deepseek-ai-DeepSeek-V3.2", {{"thinking", true}}, S::Open},
      {"GLM-4.6", Json::object(), S::MayOpen},
      {"GLM-4.6", off, S::Closed},
      {"GLM-4.7-Flash", Json::object(), S::Open},
      {"GLM-4.7-Flash", off, S::Closed},  // "</think>" alone
      {"google-gemma-4-31B-it", Json::object(), S::Closed},  // "<|channel>thought\n<channel|>"
      {"google-gemma-4-31B-it", on, S::MayOpen},
  };
  for (const Case& c : cases) {
    const ReasoningSyntax& syntax =
        reasoning_syntax(*detect_reasoning_format(template_text(c.name)));
    std::string prompt = render_prompt(c.name, c.kwargs);
    EXPECT_EQ(thinking_start(syntax, prompt), c.start) << c.name << " " << c.kwargs.dump()
                                                       << "\n" << prompt;
  }
  // A template that writes the start and its label.
  EXPECT_EQ(thinking_start(gemma(), "<|turn>model\n<|channel>thought\n"), S::Open);
  EXPECT_EQ(thinking_start(gemma(), "<|turn>model\n"), S::MayOpen);
}

struct SplitCase {
  const ReasoningSyntax* syntax;
  ThinkingStart start;
  std::string output;
  std::string reasoning, content;
};

std::vector<SplitCase> split_cases() {
  using S = ThinkingStart;
  const ReasoningSyntax* t = &think();
  const ReasoningSyntax* g = &gemma();
  return {
      // The model opens the block (Qwen3, GLM-4.6).
      {t, S::MayOpen, "<think>\nLet me see.\nYes.\n</think>\n\nThe answer.", "Let me see.\nYes.", "The answer."},
      {t, S::MayOpen, "\n<think>r</think>c", "r", "c"},  // GLM's leading line break
      {t, S::MayOpen, "The answer <think>not this</think>", "", "The answer <think>not this</think>"},
      {t, S::MayOpen, "         <think>r</think>c", "", "         <think>r</think>c"},  // 9 spaces
      {t, S::MayOpen, "<think>cut off by max_tokens", "cut off by max_tokens", ""},
      {t, S::MayOpen, "<think>cut at </thi", "cut at </thi", ""},
      {t, S::MayOpen, "<thi", "", "<thi"},
      {t, S::MayOpen, "  ", "", "  "},
      {t, S::MayOpen, "", "", ""},
      {t, S::MayOpen, "<think></think>", "", ""},
      {t, S::MayOpen, "<think>a</think>b</think>c", "a", "b</think>c"},
      // The prompt opened it (DeepSeek-R1, Qwen3.5, GLM-4.7).
      {t, S::Open, "Thinking.\n</think>\n\n{\"a\": 1}", "Thinking.", "{\"a\": 1}"},
      {t, S::Open, "<think>\nrepeated start</think>answer", "repeated start", "answer"},
      {t, S::Open, "never closed\n\n", "never closed", ""},
      {t, S::Open, "</think>direct", "", "direct"},
      {t, S::Open, "a < b </thinking> c</think>  \n d \n", "a < b </thinking> c", "d \n"},
      // Thinking off: all content, delimiters included.
      {t, S::Closed, "<think>x</think>y", "", "<think>x</think>y"},
      // Gemma 4: the channel label is dropped.
      {g, S::MayOpen, "<|channel>thought\nLet me see.<channel|>The answer", "Let me see.", "The answer"},
      {g, S::MayOpen, "<|channel>thoughtful<channel|>x", "thoughtful", "x"},
      {g, S::MayOpen, "<|channel>thought", "", ""},
      {g, S::MayOpen, "Plain answer", "", "Plain answer"},
      {g, S::Open, "r<channel|>c", "r", "c"},
  };
}

TEST(ReasoningParser, SplitsOutputs) {
  for (const SplitCase& c : split_cases()) {
    ReasoningDelta d = split_reasoning(*c.syntax, c.start, c.output);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.syntax->name << " " << int(c.start) << " " << c.output;
    EXPECT_EQ(d.content, c.content) << c.syntax->name << " " << int(c.start) << " " << c.output;
  }
}

ReasoningDelta stream(const SplitCase& c, const std::vector<size_t>& cuts) {
  ReasoningParser p(*c.syntax, c.start);
  ReasoningDelta all;
  size_t from = 0;
  for (size_t cut : cuts) {
    all.append(p.push(std::string_view(c.output).substr(from, cut - from)));
    from = cut;
  }
  all.append(p.push(std::string_view(c.output).substr(from)));
  all.append(p.finish());
  return all;
}

// Streaming equals the whole: byte by byte, cut once anywhere, cut at random.
TEST(ReasoningParser, StreamingSplitEqualsTheWhole) {
  std::mt19937 rng(43);
  for (const SplitCase& c : split_cases()) {
    SCOPED_TRACE(c.output);
    std::vector<size_t> every;
    for (size_t i = 1; i < c.output.size(); ++i) every.push_back(i);
    ReasoningDelta d = stream(c, every);
    EXPECT_EQ(d.reasoning, c.reasoning);
    EXPECT_EQ(d.content, c.content);
    for (size_t i = 0; i <= c.output.size(); ++i) {
      d = stream(c, {i});
      EXPECT_EQ(d.reasoning, c.reasoning) << "cut at " << i;
      EXPECT_EQ(d.content, c.content) << "cut at " << i;
    }
    for (int trial = 0; trial < 20 && c.output.size() > 2; ++trial) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < c.output.size(); ++i)
        if (rng() % 3 == 0) cuts.push_back(i);
      d = stream(c, cuts);
      EXPECT_EQ(d.reasoning, c.reasoning);
      EXPECT_EQ(d.content, c.content);
    }
  }
}

// Text comes out as soon as it cannot be a delimiter or trimmed whitespace.
TEST(ReasoningParser, HoldsBackOnlyWhatMayChange) {
  ReasoningParser p(think(), ThinkingStart::MayOpen);
  EXPECT_TRUE(p.push("\n<th").empty());  // may still open
  EXPECT_TRUE(p.in_reasoning());
  ReasoningDelta d = p.push("ink>\nStep one");
  EXPECT_EQ(d.reasoning, "Step one");
  EXPECT_TRUE(p.saw_reasoning());
  d = p.push(", step two.\n</thi");  // the line break and the partial end are held
  EXPECT_EQ(d.reasoning, ", step two.");
  d = p.push("nk>\n\nAns");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Ans");
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.push("wer").content, "wer");
  EXPECT_TRUE(p.finish().empty());

  ReasoningParser plain(think(), ThinkingStart::MayOpen);
  EXPECT_EQ(plain.push("Hello").content, "Hello");  // not a start: content at once
  EXPECT_FALSE(plain.saw_reasoning());
  ReasoningParser closed(think(), ThinkingStart::Closed);
  EXPECT_EQ(closed.push("<think>").content, "<think>");
}

TEST(ReasoningParser, ForcedEndTextClosesTheBlock) {
  for (ReasoningFormat f : {ReasoningFormat::Qwen3, ReasoningFormat::DeepSeekR1,
                            ReasoningFormat::Glm45, ReasoningFormat::Gemma4}) {
    const ReasoningSyntax& s = reasoning_syntax(f);
    EXPECT_TRUE(s.forced_end.ends_with(s.end)) << s.name;
    std::string out = "half a thought" + std::string(s.forced_end) + "{}";
    ReasoningDelta d = split_reasoning(s, ThinkingStart::Open, out);
    EXPECT_EQ(d.reasoning, "half a thought") << s.name;
    EXPECT_EQ(d.content, "{}") << s.name;
  }
}

// One choice's output split into reasoning, content and tool calls (answer_split.h): calls
// are parsed from the content only, and the split of a stream equals the split of the
// whole however the text was cut (the content around calls aside, as tool_calls.h has it).

const ReasoningSplit kQwen{&reasoning_syntax(ReasoningFormat::Qwen3), ThinkingStart::MayOpen};
const ReasoningSplit kOpened{&reasoning_syntax(ReasoningFormat::DeepSeekR1), ThinkingStart::Open};

const char* kCall = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";

TEST(AnswerSplit, CallsAreParsedFromTheContentOnly) {
  const std::string text =
      std::string("<think>\nI could write ") + kCall + " here.\n</think>\n\n" + "Done." + kCall;
  AnswerParts a = split_answer(text, kQwen, /*parse_tool_calls=*/true);
  EXPECT_EQ(a.reasoning, std::string("I could write ") + kCall + " here.");
  EXPECT_EQ(a.content, "Done.");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "f");
  EXPECT_EQ(a.calls[0].arguments, "{\"x\":1}");
  // A call inside a block the prompt opened and the output never closed: thinking.
  AnswerParts cut = split_answer(std::string("thinking ") + kCall, kOpened, true);
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "");
  // No parser: the text is all content, and the call in it is parsed.
  AnswerParts plain = split_answer(text, ReasoningSplit{}, true);
  EXPECT_EQ(plain.reasoning, "");
  EXPECT_EQ(plain.calls.size(), 2u);
}

TEST(AnswerSplit, TheStreamAddsUpToTheWhole) {
  const std::vector<std::pair<std::string, ReasoningSplit>> outputs = {
      {std::string("<think>a ") + kCall + "</think>\n\nanswer " + kCall + " tail", kQwen},
      {"reasoning\n</think>\n\n{\"total\": 3}", kOpened},
      {std::string("no thinking at all ") + kCall, kQwen},
      {"<think>never closed", kQwen},
  };
  std::mt19937 rng(43);
  for (const auto& [text, split] : outputs) {
    for (bool tools : {false, true}) {
      const AnswerParts whole = split_answer(text, split, tools);
      for (int trial = 0; trial < 20; ++trial) {
        AnswerStream stream(split, tools);
        AnswerParts sum;
        size_t at = 0;
        while (at < text.size()) {
          size_t n = std::uniform_int_distribution<size_t>(1, 7)(rng);
          StreamChunk chunk;
          chunk.text = text.substr(at, n);
          at += chunk.text.size();
          if (at == text.size()) chunk.finish = FinishReason::Stop;
          sum.append(stream.take(chunk));
        }
        EXPECT_EQ(sum.reasoning, whole.reasoning) << text;
        // With calls, the whole trims the content around them and a stream cannot take
        // back what it sent (tool_calls_test.cpp's contract); without, they are equal.
        if (whole.calls.empty()) {
          EXPECT_EQ(sum.content, whole.content) << text;
        }
        ASSERT_EQ(sum.calls.size(), whole.calls.size()) << text;
        for (size_t i = 0; i < sum.calls.size(); ++i)
          EXPECT_EQ(sum.calls[i].arguments, whole.calls[i].arguments);
      }
    }
  }
}

}  // namespace reasoning_parser_test
}  // namespace tandem::server
