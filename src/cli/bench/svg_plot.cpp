#include "cli/bench/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/error.h"

namespace tandem::cli::bench {
namespace {

// Page geometry (pixels). Each chart is a band of kChartHeight under the title.
constexpr double kWidth = 760, kTitleHeight = 40, kChartHeight = 300;
constexpr double kLeft = 80, kRight = 170, kTop = 34, kBottom = 50;

// Not template/py_repr.cpp's html_escape, though it looks alike: that one must write
// markupsafe's bytes (&#39; for ', &#34; for ") so rendered chat templates match
// transformers'; here text and double-quoted attributes need only these four entities.
std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double v) {
  return fmt::format("{:.6g}", v);
}

// Appends one formatted line of the document.
template <typename... Args>
void line(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
  out += '\n';
}

// Maps data to pixels inside one chart's plot area.
struct Frame {
  double left, right, top, bottom;  // plot area, pixels
  double lx_lo, lx_hi;              // log2(x) range shown
  double y_max;                     // y range shown is [0, y_max]

  double px(double x) const {
    return left + (std::log2(x) - lx_lo) / (lx_hi - lx_lo) * (right - left);
  }
  double py(double y) const { return bottom - y / y_max * (bottom - top); }
};

Frame make_frame(const SweepPlot& plot, const Chart& chart, double band_top) {
  Frame f{kLeft, kWidth - kRight, band_top + kTop, band_top + kChartHeight - kBottom, 0, 0, 1};
  auto [x_min, x_max] = std::minmax_element(plot.x.begin(), plot.x.end());
  double lo = std::log2(*x_min), hi = std::log2(*x_max);
  if (hi - lo < 1e-9) {
    lo -= 1;
    hi += 1;
  }
  double pad = 0.06 * (hi - lo);
  f.lx_lo = lo - pad;
  f.lx_hi = hi + pad;
  double max = 0;
  for (const PlotSeries& s : chart.series)
    for (const auto& y : s.y)
      if (y && std::isfinite(*y)) max = std::max(max, *y);
  f.y_max = nice_ticks(max).back();
  return f;
}

void draw_axes(std::string& out, const SweepPlot& plot, const Chart& chart, const Frame& f) {
  line(out,
       R"(<text class="chart-title" x="{}" y="{}" text-anchor="middle" font-size="14">{}</text>)",
       number((f.left + f.right) / 2), number(f.top - 12), escape_xml(chart.title));
  for (double t : nice_ticks(f.y_max)) {
    double y = f.py(t);
    line(out, R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#dddddd"/>)", number(f.left),
         number(y), number(f.right), number(y));
    line(out, R"(<text class="y-tick" x="{}" y="{}" text-anchor="end">{}</text>)",
         number(f.left - 6), number(y + 4), number(t));
  }
  for (double x : plot.x) {
    double px = f.px(x);
    line(out, R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333333"/>)", number(px),
         number(f.bottom), number(px), number(f.bottom + 5));
    line(out, R"(<text class="x-tick" x="{}" y="{}" text-anchor="middle">{}</text>)", number(px),
         number(f.bottom + 18), number(x));
  }
  line(out, R"(<polyline points="{},{} {},{} {},{}" fill="none" stroke="#333333"/>)",
       number(f.left), number(f.top), number(f.left), number(f.bottom), number(f.right),
       number(f.bottom));
  line(out, R"(<text class="x-label" x="{}" y="{}" text-anchor="middle">{}</text>)",
       number((f.left + f.right) / 2), number(f.bottom + 38), escape_xml(plot.x_label));
  double ly = (f.top + f.bottom) / 2, lx = f.left - 58;
  line(
      out,
      R"svg(<text class="y-label" x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>)svg",
      number(lx), number(ly), number(lx), number(ly), escape_xml(chart.y_label));
}

void draw_series(std::string& out, const SweepPlot& plot, const PlotSeries& s, const Frame& f) {
  std::string points;
  std::string markers;
  for (size_t i = 0; i < plot.x.size(); ++i) {
    if (!s.y[i] || !std::isfinite(*s.y[i])) continue;
    double px = f.px(plot.x[i]), py = f.py(*s.y[i]);
    points += fmt::format("{}{},{}", points.empty() ? "" : " ", number(px), number(py));
    line(
        markers,
        R"(<circle class="point" cx="{}" cy="{}" r="3.5" fill="{}"><title>{}: {} at {}</title></circle>)",
        number(px), number(py), s.color, escape_xml(s.name), number(*s.y[i]), number(plot.x[i]));
  }
  if (!points.empty())
    line(out, R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>)", points,
         s.color);
  out += markers;
}

void draw_legend(std::string& out, const Chart& chart, const Frame& f) {
  double x = f.right + 20, y = f.top + 10;
  for (const PlotSeries& s : chart.series) {
    line(out, R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"/>)", number(x),
         number(y), number(x + 24), number(y), s.color);
    line(out, R"(<text class="legend" x="{}" y="{}">{}</text>)", number(x + 30), number(y + 4),
         escape_xml(s.name));
    y += 20;
  }
}

void check_plot(const SweepPlot& plot) {
  if (plot.x.empty()) fail("plot '{}': no x values", plot.title);
  for (double x : plot.x)
    if (!(x > 0)) fail("plot '{}': x = {} cannot go on a log2 axis", plot.title, x);
  for (const Chart& c : plot.charts)
    for (const PlotSeries& s : c.series)
      if (s.y.size() != plot.x.size())
        fail("plot '{}': series '{}' has {} values for {} x values", plot.title, s.name, s.y.size(),
             plot.x.size());
}

}  // namespace

std::vector<double> nice_ticks(double max, int num_ticks) {
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  double raw = max / std::max(num_ticks, 1);
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / magnitude;
  double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * magnitude;
  int n = int(std::ceil(max / step - 1e-9));
  std::vector<double> ticks;
  for (int i = 0; i <= n; ++i) ticks.push_back(i * step);
  return ticks;
}

std::string render_svg(const SweepPlot& plot) {
  check_plot(plot);
  double height = kTitleHeight + kChartHeight * double(plot.charts.size());
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  line(
      out,
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="12">)",
      number(kWidth), number(height), number(kWidth), number(height));
  line(out, R"(<rect width="100%" height="100%" fill="white"/>)");
  line(out, R"(<text class="title" x="{}" y="26" text-anchor="middle" font-size="16">{}</text>)",
       number(kWidth / 2), escape_xml(plot.title));
  for (size_t k = 0; k < plot.charts.size(); ++k) {
    const Chart& chart = plot.charts[k];
    Frame f = make_frame(plot, chart, kTitleHeight + kChartHeight * double(k));
    out += "<g class=\"chart\">\n";
    draw_axes(out, plot, chart, f);
    for (const PlotSeries& s : chart.series) draw_series(out, plot, s, f);
    draw_legend(out, chart, f);
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

SweepPlot sweep_plot(const std::vector<RunSummary>& runs, const std::string& title) {
  SweepPlot plot;
  plot.title = title;
  plot.x_label = "concurrency (log2 scale)";
  PlotSeries tok{"output tok/s", "#1f77b4", {}};
  PlotSeries p50{"TTFT p50", "#2ca02c", {}}, p90{"TTFT p90", "#ff7f0e", {}},
      p99{"TTFT p99", "#d62728", {}};
  for (const RunSummary& r : runs) {
    plot.x.push_back(double(r.concurrency));
    tok.y.push_back(r.output_tokens_per_s);
    p50.y.push_back(r.ttft.p50);
    p90.y.push_back(r.ttft.p90);
    p99.y.push_back(r.ttft.p99);
  }
  plot.charts.push_back({"Throughput", "output tokens / s", {tok}});
  plot.charts.push_back({"Time to first token", "TTFT (ms)", {p50, p90, p99}});
  return plot;
}

}  // namespace tandem::cli::bench
