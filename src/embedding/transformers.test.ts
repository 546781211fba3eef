import fs from 'node:fs';
import path from 'node:path';
import { testEnv, tempDir } from '../../test/helpers/env';
import { shareTypedArraysWithNative, topicModelSpec, writeTransformersModel } from '../../test/helpers/model-fixtures';
import { forgetTransformersPipelines, tensorRows, TransformersEmbedder, transformersModelLocation } from './transformers';
import { cosine } from './types';

shareTypedArraysWithNative();

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe('transformers source', () => {
  afterEach(() => forgetTransformersPipelines());

  it('loads a tiny BERT-shaped ONNX model from a local folder, offline, and embeds meaningfully', async () => {
    const folder = writeTransformersModel(path.join(tempDir('tf'), 'model'), topicModelSpec(16));
    const env = testEnv({ MEMORY_TRANSFORMERS_MODEL: folder });
    const e = new TransformersEmbedder(env);
    expect(e.identity).toBe(folder);
    const [cat, kitten, pizza] = await e.embed(['my cat', 'the kitten', 'pizza and pasta']);
    expect(cat.length).toBe(16); // measured from the output, not configured anywhere
    for (const v of [cat, kitten, pizza]) expect(norm(v)).toBeCloseTo(1, 5);
    expect(cosine(cat, kitten)).toBeGreaterThan(cosine(cat, pizza) + 0.3);
  });

  it('loads once per process: concurrent and later embedders share one pipeline', async () => {
    const folder = writeTransformersModel(path.join(tempDir('tf'), 'model'), topicModelSpec(8));
    const env = testEnv({ MEMORY_TRANSFORMERS_MODEL: folder });
    const [a, b] = await Promise.all([new TransformersEmbedder(env).embed(['rain']), new TransformersEmbedder(env).embed(['snow'])]);
    expect(cosine(a[0], b[0])).toBeGreaterThan(0.5);
    // With the files gone only the memoised pipeline can answer.
    fs.rmSync(folder, { recursive: true, force: true });
    const [v] = await new TransformersEmbedder(env).embed(['storm']);
    expect(v.length).toBe(8);
    forgetTransformersPipelines();
    await expect(new TransformersEmbedder(env).embed(['storm'])).rejects.toMatchObject({ reason: 'model_load_failed' });
  });

  it('reports a missing folder as model_load_failed, and a later fixed folder loads', async () => {
    const dir = tempDir('tf');
    const folder = path.join(dir, 'later');
    const env = testEnv({ MEMORY_TRANSFORMERS_MODEL: folder });
    await expect(new TransformersEmbedder(env).embed(['x'])).rejects.toMatchObject({ reason: 'model_load_failed', source: 'transformers' });
    writeTransformersModel(folder, topicModelSpec(8));
    const [v] = await new TransformersEmbedder(env).embed(['cloud']);
    expect(v.length).toBe(8);
  });

  it('reads hub ids as hub models cached under DATA_DIR/models/transformers', () => {
    const env = testEnv({ MEMORY_TRANSFORMERS_MODEL: 'Xenova/all-MiniLM-L6-v2' });
    expect(transformersModelLocation(env)).toEqual({
      kind: 'hub',
      id: 'Xenova/all-MiniLM-L6-v2',
      cacheDir: path.join(env.DATA_DIR, 'models', 'transformers'),
    });
  });

  it('splits 2-D outputs and mean-pools 3-D outputs into unit rows', () => {
    const two = tensorRows({ dims: [2, 2], data: [3, 4, 0, 2] }, 2);
    expect(Array.from(two[0])).toEqual([0.6, 0.8].map((x) => expect.closeTo(x, 6)));
    expect(Array.from(two[1])).toEqual([0, 1]);
    const three = tensorRows({ dims: [1, 2, 2], data: [1, 0, 0, 1] }, 1);
    expect(three[0][0]).toBeCloseTo(Math.SQRT1_2, 6);
    expect(three[0][1]).toBeCloseTo(Math.SQRT1_2, 6);
    expect(() => tensorRows({ dims: [1, 2], data: [1, 2] }, 2)).toThrow(/1 vectors for 2 inputs/);
  });
});
