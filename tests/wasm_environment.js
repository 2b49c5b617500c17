// Prepended to the WebAssembly test program (--pre-js): emscripten gives a program a
// fixed environment of its own; the PETREL_* variables that steer the tests come from
// Node's. (ES5 only: emscripten 3.1.6's minifier mangles destructuring.)
Module["preRun"] = [function () {
  Object.keys(process.env).forEach(function (name) {
    if (name.indexOf("PETREL_") === 0) ENV[name] = process.env[name];
  });
}];
