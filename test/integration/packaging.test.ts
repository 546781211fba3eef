import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { envSchema } from '../../src/config/env';

const root = path.resolve(__dirname, '../..');
const read = (f: string) => fs.readFileSync(path.join(root, f), 'utf8');

describe('packaging', () => {
  const compose = YAML.parse(read('docker-compose.yml'));
  const cliHelp = execFileSync(process.execPath, [path.join(root, 'dist/src/cli.js'), '--help'], { encoding: 'utf8' });

  it('the compose file parses and has api, worker, redis and an optional qdrant', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['api', 'qdrant', 'redis', 'worker']);
    expect(compose.services.qdrant.profiles).toEqual(['qdrant']);
    expect(compose.services.api.volumes).toContain('engram-data:/data');
    expect(compose.services.worker.volumes).toContain('engram-data:/data');
    expect(compose.services.api.environment.HOST).toBe('0.0.0.0');
  });

  it('redis is durable and never evicts jobs, with a healthcheck', () => {
    const cmd = compose.services.redis.command.join(' ');
    expect(cmd).toMatch(/--appendonly yes/);
    expect(cmd).toMatch(/--appendfsync everysec/);
    expect(cmd).toMatch(/--maxmemory-policy noeviction/);
    expect(compose.services.redis.healthcheck.test).toEqual(['CMD', 'redis-cli', 'ping']);
  });

  it('service commands are real: built files and CLI commands that exist', () => {
    for (const svc of ['api', 'worker']) {
      const [bin, file, sub] = compose.services[svc].command;
      expect(bin).toBe('node');
      expect(fs.existsSync(path.join(root, file))).toBe(true);
      expect(cliHelp).toMatch(new RegExp(`^\\s+${sub}\\b`, 'm'));
    }
    const pkg = JSON.parse(read('package.json'));
    expect(pkg.bin.engram).toBe('dist/src/cli.js');
    for (const s of ['build', 'start', 'start:api', 'start:worker', 'test', 'typecheck', 'bench']) expect(pkg.scripts[s]).toBeTruthy();
    expect(pkg.scripts.start).toMatch(/cli\.js up$/);
    const docker = read('Dockerfile');
    expect(docker.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(docker).toMatch(/CMD \["node", "dist\/src\/cli\.js", "api"\]/);
    // glibc reads it at process start: the image's env is the only place it takes effect for api and worker.
    expect(docker).toMatch(/^ENV MALLOC_ARENA_MAX=2$/m);
  });

  it('.env.example documents every variable, one line each', () => {
    const documented = new Set(read('.env.example').split('\n').map((l) => /^([A-Z0-9_]+)=/.exec(l)?.[1]).filter(Boolean));
    const missing = Object.keys(envSchema.shape).filter((k) => !documented.has(k));
    expect(missing).toEqual([]);
  });

  it('the README starts with the run and test commands, and CI runs that test command', () => {
    const head = read('README.md').split('\n').slice(0, 10).join('\n');
    expect(head).toMatch(/npm start/);
    const testCmd = /`?(npm (?:run )?test)\b/.exec(head)?.[1];
    expect(testCmd).toBe('npm test');
    expect(read('.ci/run')).toMatch(/^npm test$/m);
  });
});
