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
  for (size_t i = 0; i < r.passage_tokens.size(); ++i) {
    const size_t u = i / size_t(r.mini_batch);
    const int k = u < m->passage_k.size() ? m->passage_k[u] : -1;
    auto it = colour.find(k);
    f << "<span title='unit " << u << ", K=" << k << "' style='background:" << (it != colour.end() ? it->second : "#fff")
      << "'>" << html_escape(char(r.passage_tokens[i])) << "</span>";
  }
  f << "</pre>\n";
}

}  // namespace ponder::cli
