#ifndef MINIJSON_UTF8_H
#define MINIJSON_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_MAX_CODEPOINT 0x10FFFFu

/* Encodes cp into out (up to 4 bytes). Returns the number of bytes written,
 * or 0 if cp is above U+10FFFF. */
int utf8_encode(uint32_t cp, char out[4]);

/* Decodes one well-formed UTF-8 sequence from s (at most n bytes).
 * Returns the number of bytes consumed, or 0 if the sequence is malformed
 * (truncated, overlong, surrogate code point, or above U+10FFFF). */
size_t utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Returns 1 if the n bytes at s are well-formed UTF-8. */
int utf8_valid(const char *s, size_t n);

/* Number of code points in a well-formed string, or (size_t)-1 if malformed. */
size_t utf8_length(const char *s, size_t n);

#endif
