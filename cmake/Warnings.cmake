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
