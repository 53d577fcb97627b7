// Nothing edo-specific: the package works with Vite's defaults (the .wasm and the worker are
// found through `new URL(…, import.meta.url)`). `base: './'` only lets dist/ be served anywhere.
export default { base: './', build: { target: 'es2022' } };
