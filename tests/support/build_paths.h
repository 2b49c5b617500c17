// This build's paths and the commands that run its tools. They come from one small file
// CMake generates (tests/CMakeLists.txt: petrel_test_paths), not from macros on every test
// file's command line: the test files' objects then name no path of this clone, and ccache
// shares them between clones (CI builds a fresh clone on every run).
#pragma once

#include <string>

namespace petrel::test {

std::string source_dir();   // the source tree
std::string fixture_dir();  // tests/fixtures
// Shell commands running this build's tools (through the emulator in cross builds).
std::string petrel_run_command();
std::string petrel_inspect_command();
std::string petrel_convert_command();

}  // namespace petrel::test
