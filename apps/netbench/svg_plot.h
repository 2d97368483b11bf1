// Small static charts as SVG for the benchmark's HTML report: points (one circle per data
// point, carrying its value in data-value so a reader or a test can find the run's data in
// the picture), lines, box-and-whisker marks, linear or log axes, categorical x axes and a
// legend. No scripts, no external fonts or styles: the SVG reads the same inline in a page
// and as its own file.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace wcomm::bench {

struct PlotPoint {
  double x = 0.0;
  double y = 0.0;
  std::string label;  // the point's tooltip (<title>); its data-value is y
  int line_group = 0;  // draw_line joins consecutive points of the same group only
};

struct PlotSeries {
  std::string name;   // legend entry and the data-series attribute of its marks
  std::string color;  // any SVG colour, e.g. "#1f77b4"
  std::vector<PlotPoint> points;
  bool draw_points = true;  // a circle (class "point") per point
  bool draw_line = false;   // a polyline through the points in their order (one per line_group run)
  bool hollow = false;      // circles drawn as rings (tells a p99 from a p50 of the same colour)
  bool dashed = false;      // a dashed line
  double radius = 2.5;
  double opacity = 0.65;
};

// Box and whiskers at x: whiskers from low to high, a box from q1 to q3, a line at the median.
struct PlotBox {
  double x = 0.0;
  double half_width = 0.3;  // in x units
  double low = 0.0, q1 = 0.0, median = 0.0, q3 = 0.0, high = 0.0;
  std::string series;  // data-series of the mark
  std::string color;
  std::string label;   // tooltip
};

// A horizontal tick mark at y from x0 to x1 (a median among trial points), class "marker".
struct PlotMarker {
  double x0 = 0.0, x1 = 0.0, y = 0.0;
  std::string series;
  std::string color;
  std::string label;
};

struct PlotAxis {
  std::string label;
  bool log_scale = false;  // needs positive values; non-positive ones are left out of the plot
  bool include_zero = false;
  // A categorical axis: tick i (at value i) reads categories[i]; the range is [-0.5, n - 0.5].
  std::vector<std::string> categories;
};

struct Plot {
  std::string id;     // the svg element's id is "plot-" + id; --svg-dir writes id + ".svg"
  std::string title;
  std::string note;   // one line under the plot in the HTML page (what the marks mean)
  PlotAxis x;
  PlotAxis y;
  std::vector<PlotSeries> series;
  std::vector<PlotBox> boxes;
  std::vector<PlotMarker> markers;
  std::string empty_message = "no data in this run";  // drawn when there is nothing to plot
  int width = 760;
  int height = 400;

  // Points, boxes and markers, all counted: zero means the empty message is drawn.
  std::size_t mark_count() const;
};

// The plot as an <svg> element. `standalone` adds the XML declaration and the SVG namespace a
// file needs (an inline <svg> in HTML gets its namespace from the parser).
std::string render_svg(const Plot& plot, bool standalone);

// Text made safe for XML / HTML content and attribute values (& < > " ').
std::string escape_xml(const std::string& text);

// A number in its shortest round-trip form ("0.436559", "6584.158145304877"), for data-value.
std::string exact_number(double value);

// A number for people: about four significant digits, no exponent for usual magnitudes.
std::string readable_number(double value);

// The standard qualitative palette used by the report's plots, cycling.
const std::string& palette_color(std::size_t index);

}  // namespace wcomm::bench
