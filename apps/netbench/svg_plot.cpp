// Rendering of the report's charts as SVG text.
#include "netbench/svg_plot.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>

namespace wcomm::bench {
namespace {

constexpr double kMarginLeft = 76.0;
constexpr double kMarginRight = 24.0;
constexpr double kMarginTop = 40.0;
constexpr double kMarginBottom = 64.0;
constexpr double kLegendRow = 18.0;

std::string px(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

// Maps data values on one axis to pixels.
struct Scale {
  double lo = 0.0;
  double hi = 1.0;
  bool log = false;
  double from_px = 0.0;  // pixel of lo
  double to_px = 1.0;    // pixel of hi

  double t(double v) const { return log ? std::log10(v) : v; }
  double operator()(double v) const {
    const double a = t(lo);
    const double b = t(hi);
    const double f = b > a ? (t(v) - a) / (b - a) : 0.5;
    return from_px + f * (to_px - from_px);
  }
  bool shows(double v) const { return std::isfinite(v) && (!log || v > 0.0); }
};

double nice_step(double raw) {
  if (!(raw > 0.0) || !std::isfinite(raw)) return 1.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  const double nice = fraction <= 1.0 ? 1.0 : fraction <= 2.0 ? 2.0 : fraction <= 2.5 ? 2.5 : fraction <= 5.0 ? 5.0 : 10.0;
  return nice * magnitude;
}

std::vector<double> linear_ticks(double lo, double hi) {
  const double step = nice_step((hi - lo) / 6.0);
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && ticks.size() < 50; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  const int first = static_cast<int>(std::floor(std::log10(lo)));
  const int last = static_cast<int>(std::ceil(std::log10(hi)));
  const bool fine = last - first <= 3;  // few decades: label 1, 2, 5 of each
  std::vector<double> ticks;
  for (int e = first; e <= last; ++e) {
    for (const double m : fine ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
      const double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  return ticks;
}

// The range of `values` padded for drawing (or [0, 1] when there are none).
std::pair<double, double> axis_range(std::vector<double> values, const PlotAxis& axis, bool log) {
  if (log) values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0.0); }), values.end());
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  if (values.empty()) return log ? std::pair{1.0, 10.0} : std::pair{0.0, 1.0};
  double lo = *std::min_element(values.begin(), values.end());
  double hi = *std::max_element(values.begin(), values.end());
  if (log) {
    const double decades = std::max(std::log10(hi / lo), 0.3);
    return {lo / std::pow(10.0, 0.05 * decades), hi * std::pow(10.0, 0.05 * decades)};
  }
  if (axis.include_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (hi == lo) {
    const double spread = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= spread;
    hi += spread;
  }
  const double pad = (hi - lo) * 0.05;
  const double padded_lo = axis.include_zero && lo >= 0.0 ? lo : lo - pad;
  return {padded_lo, hi + pad};
}

std::string text_element(double x, double y, const std::string& text, const std::string& extra) {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" " + extra + ">" + escape_xml(text) + "</text>\n";
}

std::string tooltip(const std::string& label) {
  return label.empty() ? std::string() : "<title>" + escape_xml(label) + "</title>";
}

}  // namespace

std::size_t Plot::mark_count() const {
  std::size_t count = boxes.size() + markers.size();
  for (const auto& s : series) count += s.points.size();
  return count;
}

std::string escape_xml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text; tool output may hold them.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::string exact_number(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "NaN" : (value > 0 ? "Infinity" : "-Infinity");
  char text[64];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : std::string("0");
}

std::string readable_number(double value) {
  if (!std::isfinite(value)) return exact_number(value);
  if (value == 0.0) return "0";
  char text[64];
  const double magnitude = std::abs(value);
  if (magnitude >= 1e4 && magnitude < 1e15) std::snprintf(text, sizeof text, "%.0f", value);
  else std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

const std::string& palette_color(std::size_t index) {
  // Tableau 10: distinguishable, and readable by most colour-blind viewers.
  static const std::array<std::string, 10> kColors{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColors[index % kColors.size()];
}

std::string render_svg(const Plot& plot, bool standalone) {
  const double width = plot.width;
  // Legend: one entry per distinct series name, wrapped into rows under the x-axis label.
  struct LegendEntry {
    std::string first;   // name
    std::string second;  // color
    bool hollow = false;
  };
  std::vector<LegendEntry> legend;
  std::set<std::string> seen;
  auto add_legend = [&](const std::string& name, const std::string& color, bool hollow = false) {
    if (!name.empty() && seen.insert(name).second) legend.push_back({name, color, hollow});
  };
  for (const auto& s : plot.series) add_legend(s.name, s.color, s.hollow);
  for (const auto& b : plot.boxes) add_legend(b.series, b.color);
  for (const auto& m : plot.markers) add_legend(m.series, m.color);
  std::vector<std::vector<std::size_t>> rows(1);
  double row_width = 0.0;
  const double legend_room = width - kMarginLeft - kMarginRight;
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double item = 26.0 + 6.6 * static_cast<double>(legend[i].first.size());
    if (row_width > 0.0 && row_width + item > legend_room) {
      rows.emplace_back();
      row_width = 0.0;
    }
    rows.back().push_back(i);
    row_width += item;
  }
  const double legend_height = legend.empty() ? 0.0 : kLegendRow * static_cast<double>(rows.size());
  // Category labels wider than their slot are written slanted, and push what is below down.
  std::size_t longest_category = 0;
  for (const auto& c : plot.x.categories) longest_category = std::max(longest_category, c.size());
  const double slot = plot.x.categories.empty()
                          ? 0.0
                          : (width - kMarginLeft - kMarginRight) / static_cast<double>(plot.x.categories.size());
  const bool slanted = !plot.x.categories.empty() && 6.2 * static_cast<double>(longest_category) > slot - 6.0;
  const double label_extra = slanted ? std::min(6.2 * 0.6 * static_cast<double>(longest_category), 140.0) : 0.0;
  const double height = plot.height + label_extra + legend_height;
  const double left = kMarginLeft;
  const double right = width - kMarginRight;
  const double top = kMarginTop;
  const double bottom = plot.height - kMarginBottom;

  std::string svg;
  if (standalone) svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg";
  if (standalone) svg += " xmlns=\"http://www.w3.org/2000/svg\"";
  svg += " id=\"plot-" + escape_xml(plot.id) + "\" class=\"plot\" width=\"" + px(width) + "\" height=\"" + px(height) +
         "\" viewBox=\"0 0 " + px(width) + " " + px(height) + "\" role=\"img\" aria-label=\"" + escape_xml(plot.title) +
         "\" font-family=\"sans-serif\">\n";
  svg += "<title>" + escape_xml(plot.title) + "</title>\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + px(width) + "\" height=\"" + px(height) + "\" fill=\"#ffffff\"/>\n";
  svg += text_element(width / 2, 22, plot.title, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\" fill=\"#222\"");
  svg += "<rect x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(right - left) + "\" height=\"" +
         px(bottom - top) + "\" fill=\"#fafafa\" stroke=\"#999\" stroke-width=\"1\"/>\n";

  if (plot.mark_count() == 0) {
    svg += text_element((left + right) / 2, (top + bottom) / 2, plot.empty_message,
                        "class=\"empty\" text-anchor=\"middle\" font-size=\"13\" fill=\"#777\"");
    svg += "</svg>\n";
    return svg;
  }

  // Axis ranges from every mark.
  std::vector<double> xs;
  std::vector<double> ys;
  for (const auto& s : plot.series) {
    for (const auto& p : s.points) {
      xs.push_back(p.x);
      ys.push_back(p.y);
    }
  }
  for (const auto& b : plot.boxes) {
    xs.insert(xs.end(), {b.x - b.half_width, b.x + b.half_width});
    ys.insert(ys.end(), {b.low, b.q1, b.median, b.q3, b.high});
  }
  for (const auto& m : plot.markers) {
    xs.insert(xs.end(), {m.x0, m.x1});
    ys.push_back(m.y);
  }
  const bool categorical = !plot.x.categories.empty();
  auto any_positive = [](const std::vector<double>& v) {
    return std::any_of(v.begin(), v.end(), [](double d) { return d > 0.0; });
  };
  Scale sx;
  sx.log = plot.x.log_scale && !categorical && any_positive(xs);
  if (categorical) {
    sx.lo = -0.5;
    sx.hi = static_cast<double>(plot.x.categories.size()) - 0.5;
  } else {
    std::tie(sx.lo, sx.hi) = axis_range(xs, plot.x, sx.log);
  }
  sx.from_px = left;
  sx.to_px = right;
  Scale sy;
  sy.log = plot.y.log_scale && any_positive(ys);
  std::tie(sy.lo, sy.hi) = axis_range(ys, plot.y, sy.log);
  sy.from_px = bottom;
  sy.to_px = top;

  // Grid and ticks.
  svg += "<g class=\"axes\" font-size=\"11\" fill=\"#444\">\n";
  for (const double v : sy.log ? log_ticks(sy.lo, sy.hi) : linear_ticks(sy.lo, sy.hi)) {
    const double y = sy(v);
    svg += "<line x1=\"" + px(left) + "\" y1=\"" + px(y) + "\" x2=\"" + px(right) + "\" y2=\"" + px(y) +
           "\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>\n";
    svg += text_element(left - 6, y + 4, readable_number(v), "text-anchor=\"end\"");
  }
  if (categorical) {
    for (std::size_t i = 0; i < plot.x.categories.size(); ++i) {
      const double x = sx(static_cast<double>(i));
      if (slanted) {
        svg += text_element(x, bottom + 14, plot.x.categories[i],
                            "text-anchor=\"end\" transform=\"rotate(-35 " + px(x) + " " + px(bottom + 14) + ")\"");
      } else {
        svg += text_element(x, bottom + 16, plot.x.categories[i], "text-anchor=\"middle\"");
      }
    }
  } else {
    for (const double v : sx.log ? log_ticks(sx.lo, sx.hi) : linear_ticks(sx.lo, sx.hi)) {
      const double x = sx(v);
      svg += "<line x1=\"" + px(x) + "\" y1=\"" + px(top) + "\" x2=\"" + px(x) + "\" y2=\"" + px(bottom) +
             "\" stroke=\"#eeeeee\" stroke-width=\"1\"/>\n";
      svg += text_element(x, bottom + 16, readable_number(v), "text-anchor=\"middle\"");
    }
  }
  svg += "</g>\n";
  svg += text_element((left + right) / 2, bottom + 36 + label_extra, plot.x.label + (sx.log ? " (log scale)" : ""),
                      "text-anchor=\"middle\" font-size=\"12\" fill=\"#222\"");
  const double y_mid = (top + bottom) / 2;
  svg += text_element(16, y_mid, plot.y.label + (sy.log ? " (log scale)" : ""),
                      "text-anchor=\"middle\" font-size=\"12\" fill=\"#222\" transform=\"rotate(-90 16 " + px(y_mid) +
                          ")\"");

  // Boxes under the points, so the points stay visible.
  for (const auto& b : plot.boxes) {
    if (!sy.shows(b.low) || !sy.shows(b.high)) continue;
    const double x0 = sx(b.x - b.half_width);
    const double x1 = sx(b.x + b.half_width);
    const double xm = sx(b.x);
    svg += "<g class=\"box\" data-series=\"" + escape_xml(b.series) + "\" data-median=\"" + exact_number(b.median) +
           "\" stroke=\"" + b.color + "\" stroke-width=\"1.2\">" + tooltip(b.label) + "\n";
    svg += "<line x1=\"" + px(xm) + "\" y1=\"" + px(sy(b.low)) + "\" x2=\"" + px(xm) + "\" y2=\"" + px(sy(b.high)) + "\"/>\n";
    svg += "<rect x=\"" + px(x0) + "\" y=\"" + px(sy(b.q3)) + "\" width=\"" + px(x1 - x0) + "\" height=\"" +
           px(std::max(sy(b.q1) - sy(b.q3), 0.5)) + "\" fill=\"" + b.color + "\" fill-opacity=\"0.15\"/>\n";
    svg += "<line x1=\"" + px(x0) + "\" y1=\"" + px(sy(b.median)) + "\" x2=\"" + px(x1) + "\" y2=\"" + px(sy(b.median)) +
           "\" stroke-width=\"2.5\"/>\n";
    svg += "</g>\n";
  }
  for (const auto& s : plot.series) {
    if (!s.draw_line) continue;
    std::string points;
    auto flush = [&] {
      if (points.empty()) return;
      points.pop_back();
      svg += "<polyline class=\"line\" data-series=\"" + escape_xml(s.name) + "\" points=\"" + points +
             "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.5\"" +
             (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>\n";
      points.clear();
    };
    for (std::size_t i = 0; i < s.points.size(); ++i) {
      const auto& p = s.points[i];
      if (i > 0 && p.line_group != s.points[i - 1].line_group) flush();
      if (!sx.shows(p.x) || !sy.shows(p.y)) continue;
      points += px(sx(p.x)) + "," + px(sy(p.y)) + " ";
    }
    flush();
  }
  for (const auto& s : plot.series) {
    if (!s.draw_points) continue;
    char opacity[16];
    std::snprintf(opacity, sizeof opacity, "%.2f", s.opacity);
    svg += "<g class=\"series\" data-series=\"" + escape_xml(s.name) + "\" fill=\"" +
           (s.hollow ? std::string("#ffffff") : s.color) + "\" fill-opacity=\"" + opacity + "\"" +
           (s.hollow ? " stroke=\"" + s.color + "\" stroke-width=\"1.5\"" : std::string()) + ">\n";
    for (const auto& p : s.points) {
      if (!sx.shows(p.x) || !sy.shows(p.y)) continue;
      svg += "<circle class=\"point\" data-series=\"" + escape_xml(s.name) + "\" data-value=\"" + exact_number(p.y) +
             "\" cx=\"" + px(sx(p.x)) + "\" cy=\"" + px(sy(p.y)) + "\" r=\"" + px(s.radius) + "\">" + tooltip(p.label) +
             "</circle>\n";
    }
    svg += "</g>\n";
  }
  for (const auto& m : plot.markers) {
    if (!sy.shows(m.y)) continue;
    svg += "<line class=\"marker\" data-series=\"" + escape_xml(m.series) + "\" data-value=\"" + exact_number(m.y) +
           "\" x1=\"" + px(sx(m.x0)) + "\" y1=\"" + px(sy(m.y)) + "\" x2=\"" + px(sx(m.x1)) + "\" y2=\"" + px(sy(m.y)) +
           "\" stroke=\"" + m.color + "\" stroke-width=\"3\">" + tooltip(m.label) + "</line>\n";
  }

  // Legend.
  if (!legend.empty()) {
    svg += "<g class=\"legend\" font-size=\"11\" fill=\"#222\">\n";
    for (std::size_t r = 0; r < rows.size(); ++r) {
      double x = left;
      const double y = plot.height - 10 + label_extra + kLegendRow * static_cast<double>(r);
      for (const std::size_t i : rows[r]) {
        svg += "<rect x=\"" + px(x) + "\" y=\"" + px(y - 9) + "\" width=\"10\" height=\"10\" fill=\"" +
               (legend[i].hollow ? "#ffffff\" stroke=\"" + legend[i].second + "\" stroke-width=\"1.5" : legend[i].second) +
               "\"/>\n";
        svg += text_element(x + 14, y, legend[i].first, "");
        x += 26.0 + 6.6 * static_cast<double>(legend[i].first.size());
      }
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace wcomm::bench
