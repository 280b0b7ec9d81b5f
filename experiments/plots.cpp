#include "experiments/plots.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "experiments/result_util.h"

namespace ponder::cli {
namespace {

std::ofstream open_out(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  return f;
}

std::string html_escape(char c) {
  switch (c) {
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '&': return "&amp;";
    case '"': return "&quot;";
    case '\n': return "↵<br>";
    default: return std::string(1, c);
  }
}

}  // namespace

size_t utf8_char_length(const std::vector<int32_t>& bytes, size_t i) {
  const int32_t b = bytes[i];
  const size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || i + n > bytes.size()) return 0;
  for (size_t j = 1; j < n; ++j)
    if ((bytes[i + j] & 0xC0) != 0x80) return 0;
  return n;
}

void run_gnuplot(const std::string& script) {
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("gnuplot failed on " + script + " (is gnuplot installed? scripts/setup.sh installs it)");
}

void write_compare_figures(const std::string& dir) {
  // Debian's interpreter, where scripts/setup.sh installs matplotlib; another python3 on PATH may lack it.
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = python + " '" + std::string(PONDER_SOURCE_ROOT) + "/scripts/plot_compare.py' '" + dir + "' 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("scripts/plot_compare.py failed on " + dir + "/results.json (is python3-matplotlib "
                             "installed? scripts/setup.sh installs it)");
}

void write_k_hist(const CompareResult& r, const std::vector<int>& options, const std::string& dir) {
  {
    std::ofstream f = open_out(dir + "/k_hist.dat");
    f << "method";
    for (int k : options) f << " K=" << k;
    f << '\n';
    for (const MethodResult& m : r.methods) {
      int64_t total = 0;
      for (int64_t c : m.k_hist) total += c;
      f << '"' << m.name << '"';
      for (size_t i = 0; i < options.size(); ++i)
        f << ' ' << (total ? double(i < m.k_hist.size() ? m.k_hist[i] : 0) / double(total) : 0.0);
      f << '\n';
    }
  }
  std::ofstream g = open_out(dir + "/k_hist.gp");
  g << "set terminal pngcairo size 900,500 font ',10'\nset output '" << dir << "/k_hist.png'\n"
    << "set title 'Share of units per inner step count K'\nset style data histograms\n"
    << "set style histogram rowstacked\nset style fill solid 0.8 border -1\nset boxwidth 0.7\n"
    << "set ylabel 'share of units'\nset yrange [0:1]\nset xtics rotate by -35\nset key outside right\n"
    << "plot for [c=2:" << options.size() + 1 << "] '" << dir << "/k_hist.dat' using c:xtic(1) title columnheader(c)\n";
  g.close();
  run_gnuplot(dir + "/k_hist.gp");
}

void write_tokens_html(const CompareResult& r, const std::string& method, const std::string& path) {
  const MethodResult* m = nullptr;
  for (const MethodResult& x : r.methods)
    if (x.name == method) m = &x;
  if (!m) throw std::invalid_argument("tokens view: no method named '" + method + "'");
  static const std::map<int, std::string> colour = {{0, "#f2f2f2"}, {1, "#cfe3f7"}, {2, "#8fc1ee"},
                                                    {4, "#f5b971"}, {8, "#e8604c"}};
  std::ofstream f = open_out(path);
  f << "<!doctype html><meta charset='utf-8'><title>Steps per token: " << method << "</title>\n"
    << "<style>body{font-family:sans-serif;max-width:60em}pre{white-space:pre-wrap;font-size:15px;line-height:1.6}"
    << "span{padding:1px 0}</style>\n<h1>Inner steps per token under <code>" << method << "</code></h1>\n"
    << "<p>A held-out passage (the first evaluation window of seed 0). Each byte is coloured by the number of "
    << "inner TTT steps K its unit of " << r.mini_batch << " tokens received. Legend: ";
  for (auto& [k, c] : colour) f << "<span style='background:" << c << "'>&nbsp;K=" << k << "&nbsp;</span> ";
  f << "</p>\n<pre>";
  // One span per character, not per byte: a multi-byte UTF-8 character split over spans shows as '�'. A character
  // takes the colour of the unit of its first byte; a byte that starts no valid character shows as U+FFFD.
  const std::vector<int32_t>& t = r.passage_tokens;
  for (size_t i = 0; i < t.size();) {
    const size_t n = utf8_char_length(t, i);
    const size_t u = i / size_t(r.mini_batch);
    const int k = u < m->passage_k.size() ? m->passage_k[u] : -1;
    auto it = colour.find(k);
    std::string text;
    if (n <= 1)
      text = n == 1 ? html_escape(char(t[i])) : "\xEF\xBF\xBD";
    else
      for (size_t j = 0; j < n; ++j) text += char(t[i + j]);
    f << "<span title='unit " << u << ", K=" << k << "' style='background:" << (it != colour.end() ? it->second : "#fff")
      << "'>" << text << "</span>";
    i += std::max<size_t>(n, 1);
  }
  f << "</pre>\n";
}

}  // namespace ponder::cli
