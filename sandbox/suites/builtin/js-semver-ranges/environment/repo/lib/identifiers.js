'use strict';

const NUMERIC = /^[0-9]+$/;

function isNumeric(id) {
  return typeof id === 'number' || NUMERIC.test(id);
}

/**
 * Compares two prerelease identifiers following SemVer 2.0.0 §11:
 * numeric identifiers compare numerically and always have lower precedence
 * than alphanumeric ones; alphanumeric identifiers compare in ASCII order.
 */
function compareIdentifiers(a, b) {
  const aNum = isNumeric(a);
  const bNum = isNumeric(b);
  if (aNum && bNum) {
    const x = Number(a);
    const y = Number(b);
    return x === y ? 0 : x < y ? -1 : 1;
  }
  if (aNum) return -1;
  if (bNum) return 1;
  const x = String(a);
  const y = String(b);
  return x === y ? 0 : x < y ? -1 : 1;
}

function rcompareIdentifiers(a, b) {
  return compareIdentifiers(b, a);
}

module.exports = { compareIdentifiers, rcompareIdentifiers, isNumeric };
