#include "escape.h"

#include <stdint.h>

#include "utf8.h"

static const char HEX[] = "0123456789abcdef";

static int put_u16(jbuf *out, uint32_t unit)
{
    char esc[6];

    esc[0] = '\\';
    esc[1] = 'u';
    esc[2] = HEX[(unit >> 12) & 0xF];
    esc[3] = HEX[(unit >> 8) & 0xF];
    esc[4] = HEX[(unit >> 4) & 0xF];
    esc[5] = HEX[unit & 0xF];
    return jbuf_append(out, esc, sizeof(esc));
}

static int put_codepoint_escaped(jbuf *out, uint32_t cp)
{
    if (cp < 0x10000)
        return put_u16(out, cp);
    cp -= 0x10000;
    if (put_u16(out, 0xD800 | (cp >> 10)) != 0)
        return -1;
    return put_u16(out, 0xDC00 | (cp & 0x3FF));
}

static const char *short_escape(unsigned char c, unsigned flags)
{
    switch (c) {
    case '"':  return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '/':  return (flags & JSON_ESCAPE_SLASH) ? "\\/" : NULL;
    default:   return NULL;
    }
}

json_err json_escape(jbuf *out, const char *s, size_t n, unsigned flags)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        int rc;

        if (c < 0x80) {
            const char *esc = short_escape(c, flags);

            if (esc)
                rc = jbuf_puts(out, esc);
            else if (c < 0x20 || c == 0x7F)
                rc = put_u16(out, c);
            else
                rc = jbuf_putc(out, (char)c);
            i++;
        } else {
            uint32_t cp;
            size_t k = utf8_decode(s + i, n - i, &cp);

            if (k == 0)
                return JSON_ERR_UTF8;
            if (flags & JSON_ESCAPE_ASCII)
                rc = put_codepoint_escaped(out, cp);
            else
                rc = jbuf_append(out, s + i, k);
            i += k;
        }
        if (rc != 0)
            return JSON_ERR_NOMEM;
    }
    return JSON_OK;
}

json_err json_quote(jbuf *out, const char *s, size_t n, unsigned flags)
{
    json_err err;

    if (jbuf_putc(out, '"') != 0)
        return JSON_ERR_NOMEM;
    err = json_escape(out, s, n, flags);
    if (err != JSON_OK)
        return err;
    if (jbuf_putc(out, '"') != 0)
        return JSON_ERR_NOMEM;
    return JSON_OK;
}
