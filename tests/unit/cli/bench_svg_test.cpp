// The SVG writer: a well-formed document (tags balanced, text escaped), one marker per
// present value, tick labels per x, a legend entry per series, and a log2 x axis.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "cli/bench/svg_plot.h"
#include "core/error.h"

namespace tandem::cli::bench {
namespace bench_svg_test {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    n++;
  return n;
}

// A small XML well-formedness check: every start tag closed in order, attribute values
// quoted, no bare '<' or '&' in text. Returns "" when fine, else what is wrong.
std::string xml_problem(const std::string& doc) {
  std::vector<std::string> open;
  size_t pos = 0;
  if (doc.rfind("<?xml", 0) == 0) pos = doc.find("?>") + 2;
  bool seen_root = false;
  while (pos < doc.size()) {
    size_t lt = doc.find('<', pos);
    std::string text = doc.substr(pos, lt == std::string::npos ? std::string::npos : lt - pos);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '&' &&
          !std::regex_search(text.substr(i), std::regex("^&(amp|lt|gt|quot|apos);")))
        return "bare & in text: " + text;
    if (lt == std::string::npos) break;
    size_t gt = doc.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag";
    std::string tag = doc.substr(lt + 1, gt - lt - 1);
    if (count(tag, "\"") % 2 != 0) return "unbalanced quotes in <" + tag + ">";
    if (tag.find('<') != std::string::npos) return "'<' inside a tag: " + tag;
    if (!tag.empty() && tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1))
        return "unexpected </" + tag.substr(1) + ">";
      open.pop_back();
    } else {
      std::string name = tag.substr(0, tag.find_first_of(" \n/"));
      if (open.empty() && seen_root) return "second root element <" + name + ">";
      seen_root = true;
      if (tag.back() != '/') open.push_back(name);
    }
    pos = gt + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return seen_root ? "" : "no root element";
}

std::vector<double> attribute_values(const std::string& doc, const std::string& cls,
                                     const std::string& attr) {
  std::vector<double> out;
  std::regex re("class=\"" + cls + "\" " + attr + "=\"([-0-9.e]+)\"");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back(std::stod((*it)[1].str()));
  return out;
}

SweepPlot example() {
  SweepPlot p;
  p.title = "bench <tiny> & fast";
  p.x_label = "concurrency";
  p.x = {1, 2, 4, 16};
  p.charts.push_back({"Throughput", "tok/s", {{"out tok/s", "#1f77b4", {10.0, 19.0, 35.0, 80.0}}}});
  p.charts.push_back({"TTFT",
                      "ms",
                      {{"p50", "#2ca02c", {5.0, 6.0, 9.0, 20.0}},
                       {"p99", "#d62728", {7.0, std::nullopt, 15.0, 41.0}}}});
  return p;
}

TEST(BenchSvg, WellFormedWithOnePointPerValue) {
  std::string svg = render_svg(example());
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"chart\""), 2u);
  EXPECT_EQ(count(svg, "class=\"point\""), 11u);         // 3 series × 4 x, one value missing
  EXPECT_EQ(count(svg, "<polyline points=\"") - 2, 3u);  // one line per series (+ 2 axis frames)
  EXPECT_EQ(count(svg, "class=\"x-tick\""), 8u);         // 4 per chart
  EXPECT_EQ(count(svg, "class=\"legend\""), 3u);
  EXPECT_NE(svg.find(">out tok/s</text>"), std::string::npos);
  EXPECT_NE(svg.find(">16</text>"), std::string::npos);
  EXPECT_NE(svg.find("bench &lt;tiny&gt; &amp; fast"), std::string::npos);
  EXPECT_EQ(svg.find("<tiny>"), std::string::npos);
}

TEST(BenchSvg, XAxisIsLog2) {
  std::string svg = render_svg(example());
  std::vector<double> x = attribute_values(svg, "x-tick", "x");
  ASSERT_EQ(x.size(), 8u);
  // 1 → 2 → 4 are one octave apart each; 4 → 16 is two.
  EXPECT_NEAR(x[1] - x[0], x[2] - x[1], 1e-2);  // coordinates carry 6 digits
  EXPECT_NEAR(x[3] - x[2], 2 * (x[1] - x[0]), 1e-2);
  EXPECT_GT(x[1], x[0]);
}

TEST(BenchSvg, HigherValuesAreHigherOnThePage) {
  SweepPlot p;
  p.x = {1, 2};
  p.charts.push_back({"c", "y", {{"s", "black", {1.0, 3.0}}}});
  std::string svg = render_svg(p);
  std::regex re("class=\"point\" cx=\"[-0-9.e]+\" cy=\"([-0-9.e]+)\"");
  std::vector<double> cy;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
       ++it)
    cy.push_back(std::stod((*it)[1].str()));
  ASSERT_EQ(cy.size(), 2u);
  EXPECT_LT(cy[1], cy[0]);  // SVG y grows downwards
}

TEST(BenchSvg, NiceTicks) {
  EXPECT_EQ(nice_ticks(47), (std::vector<double>{0, 10, 20, 30, 40, 50}));
  EXPECT_EQ(nice_ticks(100), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0).back(), 1.0);  // an all-zero chart still has a scale
  std::vector<double> small = nice_ticks(0.3);
  ASSERT_EQ(small.size(), 4u);
  EXPECT_NEAR(small.back(), 0.3, 1e-12);
}

TEST(BenchSvg, RejectsBadInput) {
  SweepPlot p = example();
  p.x[0] = 0;
  EXPECT_THROW(render_svg(p), Error);
  p = example();
  p.charts[0].series[0].y.pop_back();
  EXPECT_THROW(render_svg(p), Error);
}

TEST(BenchSvg, SweepPlotFromSummaries) {
  std::vector<RunSummary> runs(3);
  for (int i = 0; i < 3; ++i) {
    runs[i].concurrency = 1 << i;
    runs[i].output_tokens_per_s = 100.0 * (i + 1);
    runs[i].ttft.p50 = 10.0 * (i + 1);
    runs[i].ttft.p90 = 12.0 * (i + 1);
    runs[i].ttft.p99 = 15.0 * (i + 1);
  }
  std::string svg = render_svg(sweep_plot(runs, "sweep"));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "class=\"point\""), 12u);  // (1 + 3 series) × 3 runs
  EXPECT_EQ(count(svg, "class=\"legend\""), 4u);
  EXPECT_NE(svg.find(">TTFT p99</text>"), std::string::npos);
}

}  // namespace bench_svg_test
}  // namespace tandem::cli::bench
