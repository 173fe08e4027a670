# The warning set every linkfit target links against (an interface target, so that flags stay in
# one place and third-party code compiled elsewhere is not affected).
add_library(linkfit_warnings INTERFACE)
target_compile_options(linkfit_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Woverloaded-virtual -Wconversion -Wsign-conversion -Wnull-dereference -Wdouble-promotion
  -Wformat=2 -Wimplicit-fallthrough)
if(LINKFIT_WERROR)
  target_compile_options(linkfit_warnings INTERFACE -Werror)
endif()
# clang checks the locking contract the headers state (common/mutex.h: LINKFIT_GUARDED_BY,
# LINKFIT_REQUIRES); the fuzz preset is the clang build CI runs.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(linkfit_warnings INTERFACE -Wthread-safety)
endif()
