# Embeds runtime/explorer/explorer.html in the build as a C++ raw string literal
# (build/generated/explorer_template.inc), rewritten only when the page changes; an edit to the
# page configures again. No downloads: the page is a source file.
set(pipeworks_explorer_page ${PROJECT_SOURCE_DIR}/runtime/explorer/explorer.html)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${pipeworks_explorer_page})
file(READ ${pipeworks_explorer_page} pipeworks_explorer_text)
string(FIND "${pipeworks_explorer_text}" ")pwx\"" pipeworks_explorer_clash)
if(NOT pipeworks_explorer_clash EQUAL -1)
  message(FATAL_ERROR "runtime/explorer/explorer.html contains )pwx\", which ends the raw string it is embedded in")
endif()
file(WRITE ${PROJECT_BINARY_DIR}/generated/explorer_template.inc.new
     "R\"pwx(${pipeworks_explorer_text})pwx\"\n")
configure_file(${PROJECT_BINARY_DIR}/generated/explorer_template.inc.new
               ${PROJECT_BINARY_DIR}/generated/explorer_template.inc COPYONLY)
