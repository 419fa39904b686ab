'use strict';

const functions = require('./lib/functions');
const range = require('./lib/range');
const { Comparator } = require('./lib/comparator');
const { compareIdentifiers, rcompareIdentifiers } = require('./lib/identifiers');

module.exports = {
  ...functions,
  ...range,
  Comparator,
  compareIdentifiers,
  rcompareIdentifiers,
};
