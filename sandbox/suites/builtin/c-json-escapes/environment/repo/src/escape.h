#ifndef MINIJSON_ESCAPE_H
#define MINIJSON_ESCAPE_H

#include <stddef.h>

#include "jbuf.h"
#include "lexer.h"

/* Flags for json_escape / json_quote. */
#define JSON_ESCAPE_ASCII 0x1u  /* write every non-ASCII code point as \uXXXX */
#define JSON_ESCAPE_SLASH 0x2u  /* write '/' as "\/" (safe inside <script>) */

/* Appends the JSON-escaped form of the UTF-8 string s (n bytes) to out,
 * without surrounding quotes. Returns JSON_OK, JSON_ERR_UTF8 if s is not
 * well-formed UTF-8, or JSON_ERR_NOMEM. */
json_err json_escape(jbuf *out, const char *s, size_t n, unsigned flags);

/* Like json_escape but wraps the result in double quotes. */
json_err json_quote(jbuf *out, const char *s, size_t n, unsigned flags);

#endif
