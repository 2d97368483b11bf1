// The frame shared by the small one-topic report pages (fan-out, flows): the head with its
// few styles, and the footer that names the report. Nothing is fetched from elsewhere.
#pragma once

#include <string>

#include "svg_plot.h"  // escape_xml

namespace wcomm::bench {

// <!DOCTYPE html> up to and including the page's <h1>heading</h1>.
inline std::string simple_page_start(const std::string& title, const std::string& heading) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" + escape_xml(title) +
         "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:2px 8px}td.num{text-align:right}th{background:#eee}"
         "svg.plot{max-width:100%;height:auto}</style>\n</head>\n<body>\n<h1>" +
         escape_xml(heading) + "</h1>\n";
}

// The footer naming the report the page was drawn from, and the end of the page.
inline std::string simple_page_end(const std::string& source_name) {
  return "<footer>from " + escape_xml(source_name) +
         ". Self-contained: the plots are inline SVG and nothing is loaded from elsewhere.</footer>\n</body>\n</html>\n";
}

}  // namespace wcomm::bench
