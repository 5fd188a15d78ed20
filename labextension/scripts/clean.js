// Removes the TypeScript output and the built extension (npm run clean).
const fs = require('fs');
const path = require('path');
const root = path.resolve(__dirname, '..');
for (const dir of ['lib', require('../package.json').jupyterlab.outputDir]) {
  fs.rmSync(path.resolve(root, dir), { recursive: true, force: true });
}
