// A small SVG line-chart writer for bench sweeps (no plotting dependency): charts stacked
// vertically over one shared x axis on a log2 scale (concurrency 1, 2, 4, ...), each with
// axes, ticks, axis labels, one polyline + point markers per series, and a legend.
//
// Elements carry classes so a reader (or a test) can count them: class="point" (one
// <circle> per present value), "x-tick" / "y-tick" (tick labels), "legend" (one <text>
// per series per chart), "chart" (one <g> per chart).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/bench/bench_stats.h"

namespace tandem::cli::bench {

struct PlotSeries {
  std::string name;                      // legend text
  std::string color;                     // any SVG color, e.g. "#1f77b4"
  std::vector<std::optional<double>> y;  // one per x; none: no point there
};

struct Chart {
  std::string title;
  std::string y_label;
  std::vector<PlotSeries> series;
};

struct SweepPlot {
  std::string title;
  std::string x_label;
  std::vector<double> x;  // positive (drawn on a log2 scale; lines join them in this order)
  std::vector<Chart> charts;
};

// The whole SVG document. Throws tandem::Error for a non-positive x or a series whose
// length differs from x's.
std::string render_svg(const SweepPlot& plot);

// Output tok/s (top) and TTFT p50/p90/p99 in ms (bottom) against concurrency.
SweepPlot sweep_plot(const std::vector<RunSummary>& runs, const std::string& title);

// Round tick positions covering [0, max]: steps of 1, 2 or 5 × 10^k, about `num_ticks`.
std::vector<double> nice_ticks(double max, int num_ticks = 5);

}  // namespace tandem::cli::bench
