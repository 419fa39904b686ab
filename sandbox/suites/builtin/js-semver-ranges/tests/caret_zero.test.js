'use strict';

// Hidden tests: caret ranges on 0.x versions.
const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const semver = require('/app');

describe('FailToPass: caret ranges with major 0', () => {
  test('^0.y.z normalizes to an upper bound on the minor', () => {
    assert.equal(semver.validRange('^0.2.3'), '>=0.2.3 <0.3.0');
    assert.equal(semver.validRange('^0.1.0'), '>=0.1.0 <0.2.0');
    assert.equal(semver.validRange('^0.10.7'), '>=0.10.7 <0.11.0');
  });

  test('partial ^0.y and ^0.y.x', () => {
    assert.equal(semver.validRange('^0.2'), '>=0.2.0 <0.3.0');
    assert.equal(semver.validRange('^0.2.x'), '>=0.2.0 <0.3.0');
    assert.equal(semver.validRange('^ 0.4'), '>=0.4.0 <0.5.0');
  });

  test('^0.2.3 does not match the next minor or 1.0.0', () => {
    assert.equal(semver.satisfies('0.2.3', '^0.2.3'), true);
    assert.equal(semver.satisfies('0.2.99', '^0.2.3'), true);
    assert.equal(semver.satisfies('0.3.0', '^0.2.3'), false);
    assert.equal(semver.satisfies('0.9.1', '^0.2.3'), false);
    assert.equal(semver.satisfies('1.0.0', '^0.2.3'), false);
    assert.equal(semver.satisfies('0.2.2', '^0.2.3'), false);
  });

  test('caret with a 0.y prerelease', () => {
    assert.equal(semver.validRange('^0.1.0-beta.2'), '>=0.1.0-beta.2 <0.2.0');
    assert.equal(semver.satisfies('0.1.0-beta.3', '^0.1.0-beta.2'), true);
    assert.equal(semver.satisfies('0.1.4', '^0.1.0-beta.2'), true);
    assert.equal(semver.satisfies('0.2.0', '^0.1.0-beta.2'), false);
  });

  test('maxSatisfying / Range / toComparators use the same bounds', () => {
    const versions = ['0.2.3', '0.2.7', '0.3.0', '0.4.1', '1.0.0'];
    assert.equal(semver.maxSatisfying(versions, '^0.2.3'), '0.2.7');
    assert.equal(semver.maxSatisfying(versions, '^0.3'), '0.3.0');
    assert.equal(new semver.Range('^0.2.0 || ^0.4.0').test('0.3.5'), false);
    assert.equal(new semver.Range('^0.2.0 || ^0.4.0').test('0.4.9'), true);
    assert.deepEqual(semver.toComparators('^0.5.1'), [['>=0.5.1', '<0.6.0']]);
  });
});

describe('PassToPass: other caret forms and range syntax', () => {
  test('caret with non-zero major', () => {
    assert.equal(semver.validRange('^1.2.3'), '>=1.2.3 <2.0.0');
    assert.equal(semver.validRange('^1.2'), '>=1.2.0 <2.0.0');
    assert.equal(semver.validRange('^1.x'), '>=1.0.0 <2.0.0');
    assert.equal(semver.validRange('^10.0.1'), '>=10.0.1 <11.0.0');
    assert.equal(semver.satisfies('1.99.0', '^1.2.3'), true);
    assert.equal(semver.satisfies('2.0.0', '^1.2.3'), false);
  });

  test('caret with 0.0.z and wildcard parts', () => {
    assert.equal(semver.validRange('^0.0.3'), '>=0.0.3 <0.0.4');
    assert.equal(semver.validRange('^0.0'), '>=0.0.0 <0.1.0');
    assert.equal(semver.validRange('^0.0.x'), '>=0.0.0 <0.1.0');
    assert.equal(semver.validRange('^0.x'), '>=0.0.0 <1.0.0');
    assert.equal(semver.validRange('^0'), '>=0.0.0 <1.0.0');
    assert.equal(semver.validRange('^*'), '*');
    assert.equal(semver.satisfies('0.0.4', '^0.0.3'), false);
    assert.equal(semver.satisfies('0.5.0', '^0'), true);
  });

  test('tilde, x-ranges and hyphen ranges', () => {
    assert.equal(semver.validRange('~0.2.3'), '>=0.2.3 <0.3.0');
    assert.equal(semver.validRange('~1'), '>=1.0.0 <2.0.0');
    assert.equal(semver.validRange('0.x'), '>=0.0.0 <1.0.0');
    assert.equal(semver.validRange('>0.2'), '>=0.3.0');
    assert.equal(semver.validRange('0.2.3 - 0.4'), '>=0.2.3 <0.5.0');
    assert.equal(semver.validRange('>=1.0.0 <1.5.0 || 2.x'), '>=1.0.0 <1.5.0||>=2.0.0 <3.0.0');
  });

  test('prerelease exclusion rules', () => {
    assert.equal(semver.satisfies('0.2.4-rc.1', '^0.2.3'), false);
    assert.equal(semver.satisfies('0.2.3-beta.5', '^0.2.3-beta.1'), true);
    assert.equal(semver.satisfies('0.2.4-beta.5', '^0.2.3-beta.1'), false);
    assert.equal(semver.satisfies('2.0.0-rc.1', '^1.2.3'), false);
  });

  test('invalid ranges and versions', () => {
    assert.equal(semver.validRange('^a.b.c'), null);
    assert.equal(semver.validRange('^1.2.3.4'), null);
    assert.equal(semver.satisfies('not-a-version', '^0.2.3'), false);
    assert.throws(() => new semver.Range('>=>1'), TypeError);
  });
});
