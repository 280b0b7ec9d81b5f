#include "experiments/plots.h"

#include <algorithm>
#include <cstdlib>
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

struct Range {
  double mean = 0, lo = 1e300, hi = -1e300;
};
Range over_seeds(const MethodResult& m, double (*get)(const SeedResult&)) {
  Range r;
  for (const SeedResult& s : m.seeds) {
    double v = get(s);
    r.mean += v / double(m.seeds.size());
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
  }
  return r;
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

void write_pareto(const CompareResult& r, const std::string& dir) {
  {
    std::ofstream f = open_out(dir + "/pareto.dat");
    f << "# method  flops_per_token  bpb  bpb_min  bpb_max  flops_min  flops_max\n";
    for (const MethodResult& m : r.methods) {
      Range b = over_seeds(m, bpb_of);
      Range c = over_seeds(m, total_of);
      f << '"' << m.name << "\" " << c.mean << ' ' << b.mean << ' ' << b.lo << ' ' << b.hi << ' ' << c.lo << ' '
        << c.hi << '\n';
    }
    f << "\n\n# oracle frontier: mu  flops_per_token  bpb\n";
    for (const FrontierPoint& p : r.frontier) f << p.mu << ' ' << p.base_per_token + p.inner_per_token << ' ' << p.bpb << '\n';
  }
  std::ofstream g = open_out(dir + "/pareto.gp");
  g << "set terminal pngcairo size 900,600 font ',10'\n"
    << "set output '" << dir << "/pareto.png'\n"
    << "set title 'Bits per byte vs test-time FLOPs per token (held-out windows; bars: range over seeds)'\n"
    << "set xlabel 'FLOPs per token (base + inner TTT + policy overhead)'\nset ylabel 'bits per byte'\n"
    << "set key outside right\nset grid\n"
    << "plot '" << dir << "/pareto.dat' index 0 using 2:3:6:7:4:5 with xyerrorbars title 'methods' pt 7, \\\n"
    << "     '' index 0 using 2:3:1 with labels offset 1,0.6 font ',8' notitle, \\\n"
    << "     '' index 1 using 2:3 with linespoints dt 2 pt 6 title 'oracle frontier (loss + mu·cost; seed 0 windows only)'\n";
  g.close();
  run_gnuplot(dir + "/pareto.gp");
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
