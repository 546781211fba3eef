import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from './env';
import { ROOT } from './processes';

/**
 * Validates an OpenAPI document with @apidevtools/swagger-parser (its 3.1 JSON schema plus its own
 * checks). The package is ESM-only, which jest's CommonJS runtime on Node 20 cannot load, so it runs
 * in a child node process. Resolves with null when valid, else the validator's message.
 */
export async function validateOpenApi(doc: unknown): Promise<string | null> {
  const file = path.join(tempDir('openapi'), 'openapi.json');
  fs.writeFileSync(file, JSON.stringify(doc));
  const script = `import P from '@apidevtools/swagger-parser';
try { await P.validate(process.argv[1]); process.stdout.write('VALID'); }
catch (e) { process.stdout.write('INVALID ' + e.message); }`;
  const out = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, ['--input-type=module', '-e', script, file], { cwd: ROOT, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
  return out === 'VALID' ? null : out.replace(/^INVALID /, '');
}
