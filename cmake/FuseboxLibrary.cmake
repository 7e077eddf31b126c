# fusebox_library(NAME DIR src/<folder> [TOP_LEVEL] [DEPS targets...])
#
# Builds every .cpp under DIR into a static library. Its headers become includable as
# "<folder>/x.h" only for targets that link it: each library gets a private staging directory
# holding one link to its folder, so an include against the dependency order does not build.
#
# TOP_LEVEL: only the .cpp and .h files directly in DIR, not its subfolders. For a folder whose
# subfolders are libraries of their own that depend on it (src/backends holds the boundary,
# src/backends/cpu a backend): the staging directory then links each top-level header alone,
# so linking the boundary does not expose the subfolders' headers.
function(fusebox_library name)
  cmake_parse_arguments(ARG "TOP_LEVEL" "DIR" "DEPS" ${ARGN})
  if(ARG_TOP_LEVEL)
    file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_DIR}/*.cpp)
  else()
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_DIR}/*.cpp)
  endif()
  if(NOT sources)
    add_library(${name} INTERFACE)
    set(scope INTERFACE)
  else()
    add_library(${name} STATIC ${sources})
    set(scope PUBLIC)
  endif()
  string(REGEX REPLACE "^src/" "" rel ${ARG_DIR})
  set(stage ${CMAKE_BINARY_DIR}/include_stage/${name})
  if(ARG_TOP_LEVEL)
    file(MAKE_DIRECTORY ${stage}/${rel})
    file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_DIR}/*.h)
    foreach(header ${headers})
      get_filename_component(file ${header} NAME)
      if(NOT EXISTS ${stage}/${rel}/${file})
        file(CREATE_LINK ${header} ${stage}/${rel}/${file} SYMBOLIC)
      endif()
    endforeach()
  else()
    get_filename_component(parent ${stage}/${rel} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    if(NOT EXISTS ${stage}/${rel})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${ARG_DIR} ${stage}/${rel} SYMBOLIC)
    endif()
  endif()
  target_include_directories(${name} ${scope} ${stage})
  if(ARG_DEPS)
    target_link_libraries(${name} ${scope} ${ARG_DEPS})
  endif()
endfunction()
