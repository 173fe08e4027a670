#pragma once

// The linkfit command line. main() only forwards to RunCli, so every subcommand is reachable
// from tests with captured streams.
//
//   linkfit topo  --topology FILE [--json]
//   linkfit place --topology FILE --gpus K [--used I,J,...] [--closeness LEVEL] [--required]
//                 [--json]
//   linkfit place --topology FILE --mig-profile NAME [--mig-used GPU:PROFILE@START,...] [--json]
//   linkfit serve --config FILE [--cluster FILE] [--listen ADDR:PORT]
//   linkfit demo  [--config FILE]
//   linkfit explain --config FILE --pod POD.json [--cluster FILE] [--state-file FILE]
//
// FILE is a topology document or `nvidia-smi topo -m` text (optionally followed by the
// `--query-gpu` CSV); the format is detected.
//
// Thread-safety: RunCli is called once per process (serve installs signal handlers).

#include <iosfwd>
#include <string>
#include <vector>

namespace linkfit::app {

// Runs one subcommand; returns the process exit code (0 success, 1 no placement / failure,
// 2 usage error).
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Subcommands (each takes the arguments after its name).
int RunTopo(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunPlace(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// Starts the Service on 127.0.0.1:0 with the demo config (default config/demo.yaml, relative to
// the current directory), schedules a few pods over HTTP and tells the story on `out`.
int RunDemo(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// One line per node of the configured cluster: whether the pod in POD.json (a Pod object) fits,
// on which devices, or why not. Offline: loads the same files `serve` would, starts no server.
int RunExplain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// Replaces the process with the node agent (linkfit-agent beside this binary, or on PATH);
// returns only when it cannot be run.
int RunAgent(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace linkfit::app
