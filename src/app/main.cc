// linkfit's entry point: everything happens in RunCli (include/linkfit/app/cli.h).

#include <iostream>
#include <string>
#include <vector>

#include "linkfit/app/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return linkfit::app::RunCli(args, std::cout, std::cerr);
}
