// Puts install.json next to the built extension, so a symlinked development copy
// (make lab) shows "(python, xlanb)" in `jupyter labextension list`, like the wheel.
const fs = require('fs');
const path = require('path');
const out = path.resolve(__dirname, '..', require('../package.json').jupyterlab.outputDir);
fs.copyFileSync(path.resolve(__dirname, '..', 'install.json'), path.join(out, 'install.json'));
