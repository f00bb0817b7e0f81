# openverbs_abi_condition(COND ABI OUT): evaluates the target condition of a
# symbol-table line (the table syntax is described in
# src/facade/libibverbs.symbols and src/DESIGN.md, "ABI targets") for the ABI
# target ABI and sets OUT to TRUE or FALSE.
#   abi>=N        targets N and later
#   abi<N         targets before N
#   abi=N[,M...]  exactly the targets listed
# Anything else is an error, so a typo cannot silently drop a symbol.
# tests/abi/check_symbols.py evaluates the same syntax.
function(openverbs_abi_condition cond abi out)
  set(holds FALSE)
  if(cond MATCHES "^abi>=([0-9]+)$")
    if(abi GREATER_EQUAL ${CMAKE_MATCH_1})
      set(holds TRUE)
    endif()
  elseif(cond MATCHES "^abi<([0-9]+)$")
    if(abi LESS ${CMAKE_MATCH_1})
      set(holds TRUE)
    endif()
  elseif(cond MATCHES "^abi=([0-9]+(,[0-9]+)*)$")
    string(REPLACE "," ";" targets "${CMAKE_MATCH_1}")
    if(abi IN_LIST targets)
      set(holds TRUE)
    endif()
  else()
    message(FATAL_ERROR "bad ABI target condition '${cond}' "
                        "(expected abi>=N, abi<N or abi=N[,M...])")
  endif()
  set(${out} ${holds} PARENT_SCOPE)
endfunction()
