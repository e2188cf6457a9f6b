// Fuzz target: the YAML catalog parser (functions and GPU types, as a user writes them), and the
// parser of one function entry alone.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gshare/model/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A folder, so relative working_dir and model_files are resolved too.
  auto catalog = gshare::ParseCatalog(text, "fuzz.yaml", "/srv/fuzz");
  if (catalog.ok()) {
    // What parses must print (the functions; GPU types of the text are not printed back).
    (void)gshare::CatalogToYaml(*catalog);
  }
  // The same bytes as one function entry, as the serve registry receives a spec.
  auto entry = gshare::ParseFunctionEntry(text, "fuzz.yaml", "fuzz-tenant");
  if (entry.ok()) (void)gshare::FunctionSpecToYaml(*entry);
  return 0;
}
