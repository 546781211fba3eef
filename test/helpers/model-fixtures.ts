import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import protobuf from 'protobufjs';
import { mulberry32 } from './prng';

const TYPED_ARRAYS = [
  'Float32Array',
  'Float64Array',
  'Int8Array',
  'Int16Array',
  'Int32Array',
  'Uint8Array',
  'Uint16Array',
  'Uint32Array',
  'BigInt64Array',
  'BigUint64Array',
] as const;

/**
 * Gives the test realm the process's own typed-array constructors, before onnxruntime is first required.
 * Jest runs each file in a vm context, but onnxruntime's native binding builds its outputs in the main
 * context, so its `instanceof Float32Array` check fails ("A float32 tensor's data must be type of …").
 * Outside jest both are the same objects and this changes nothing.
 */
export function shareTypedArraysWithNative(): void {
  const g = globalThis as unknown as Record<string, unknown>;
  for (const name of TYPED_ARRAYS) {
    const outer = vm.runInThisContext(name) as unknown;
    if (g[name] !== outer) g[name] = outer;
  }
}

/** Ids of the special tokens every fixture vocabulary starts with. */
export const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]'] as const;
export const UNK_ID = 1;

export interface FixtureModelSpec {
  /** Words (and optional `##` pieces) after the special tokens; ids follow this order from 4. */
  vocab: string[];
  dim: number;
  /** Rows for some words; the rest get deterministic pseudo-random rows. */
  vectors?: Record<string, number[]>;
}


function seedOf(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

function randomRow(token: string, dim: number): number[] {
  const rnd = mulberry32(seedOf(token));
  return Array.from({ length: dim }, () => rnd() * 2 - 1);
}

/** The full token list (specials first) and the [vocab, dim] embedding matrix of a spec. */
export function fixtureMatrix(spec: FixtureModelSpec): { tokens: string[]; matrix: Float32Array } {
  const tokens = [...SPECIAL_TOKENS, ...spec.vocab];
  const matrix = new Float32Array(tokens.length * spec.dim);
  tokens.forEach((t, i) => {
    // [PAD]/[CLS]/[SEP] rows are zero so mean pooling over them only rescales; [UNK] gets a real row so dropping it is observable.
    const row = spec.vectors?.[t] ?? (t === '[UNK]' || !SPECIAL_TOKENS.includes(t as never) ? randomRow(t, spec.dim) : new Array(spec.dim).fill(0));
    if (row.length !== spec.dim) throw new Error(`fixture row for ${t} has ${row.length} values, expected ${spec.dim}`);
    matrix.set(row, i * spec.dim);
  });
  return { tokens, matrix };
}

/** A BERT-style WordPiece tokenizer.json (lower-casing normaliser, [CLS] … [SEP] template). */
export function wordPieceTokenizerJson(tokens: string[]): Record<string, unknown> {
  const vocab = Object.fromEntries(tokens.map((t, i) => [t, i]));
  const special = (content: string) => ({
    id: vocab[content],
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map(special),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } },
        { SpecialToken: { id: '[SEP]', type_id: 1 } },
      ],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [vocab['[CLS]']], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [vocab['[SEP]']], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}

const BERT_TOKENIZER_CONFIG = {
  tokenizer_class: 'BertTokenizer',
  do_lower_case: true,
  model_max_length: 512,
  pad_token: '[PAD]',
  unk_token: '[UNK]',
  cls_token: '[CLS]',
  sep_token: '[SEP]',
  clean_up_tokenization_spaces: true,
};

/** A safetensors file holding one F32 tensor. */
export function safetensorsBytes(name: string, shape: number[], data: Float32Array): Buffer {
  const header: Record<string, unknown> = {
    __metadata__: { format: 'pt' },
    [name]: { dtype: 'F32', shape, data_offsets: [0, data.byteLength] },
  };
  let json = JSON.stringify(header);
  // Pad the header so the tensor data starts 8-byte aligned, as the reference writer does.
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  return Buffer.concat([len, Buffer.from(json), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

/** Writes a model2vec folder (tokenizer.json + model.safetensors + config.json; no tokenizer_config.json, like the hub's potion models). */
export function writeModel2VecFolder(dir: string, spec: FixtureModelSpec): string {
  fs.mkdirSync(dir, { recursive: true });
  const { tokens, matrix } = fixtureMatrix(spec);
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(wordPieceTokenizerJson(tokens)));
  fs.writeFileSync(path.join(dir, 'model.safetensors'), safetensorsBytes('embeddings', [tokens.length, spec.dim], matrix));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ model_type: 'model2vec', hidden_dim: spec.dim, normalize: true }));
  return dir;
}

/** The slice of onnx.proto (field numbers as upstream) that a one-node graph needs. */
const ONNX_PROTO = {
  nested: {
    onnx: {
      nested: {
        AttributeProto: {
          fields: {
            name: { type: 'string', id: 1 },
            i: { type: 'int64', id: 3 },
            type: { type: 'int32', id: 20 },
          },
        },
        ValueInfoProto: {
          fields: { name: { type: 'string', id: 1 }, type: { type: 'TypeProto', id: 2 } },
        },
        NodeProto: {
          fields: {
            input: { rule: 'repeated', type: 'string', id: 1 },
            output: { rule: 'repeated', type: 'string', id: 2 },
            name: { type: 'string', id: 3 },
            op_type: { type: 'string', id: 4 },
            attribute: { rule: 'repeated', type: 'AttributeProto', id: 5 },
          },
        },
        ModelProto: {
          fields: {
            ir_version: { type: 'int64', id: 1 },
            producer_name: { type: 'string', id: 2 },
            graph: { type: 'GraphProto', id: 7 },
            opset_import: { rule: 'repeated', type: 'OperatorSetIdProto', id: 8 },
          },
        },
        GraphProto: {
          fields: {
            node: { rule: 'repeated', type: 'NodeProto', id: 1 },
            name: { type: 'string', id: 2 },
            initializer: { rule: 'repeated', type: 'TensorProto', id: 5 },
            input: { rule: 'repeated', type: 'ValueInfoProto', id: 11 },
            output: { rule: 'repeated', type: 'ValueInfoProto', id: 12 },
          },
        },
        TensorProto: {
          fields: {
            dims: { rule: 'repeated', type: 'int64', id: 1 },
            data_type: { type: 'int32', id: 2 },
            name: { type: 'string', id: 8 },
            raw_data: { type: 'bytes', id: 9 },
          },
        },
        TensorShapeProto: {
          fields: { dim: { rule: 'repeated', type: 'Dimension', id: 1 } },
          nested: {
            Dimension: {
              oneofs: { value: { oneof: ['dim_value', 'dim_param'] } },
              fields: { dim_value: { type: 'int64', id: 1 }, dim_param: { type: 'string', id: 2 } },
            },
          },
        },
        TypeProto: {
          oneofs: { value: { oneof: ['tensor_type'] } },
          fields: { tensor_type: { type: 'Tensor', id: 1 } },
          nested: {
            Tensor: {
              fields: { elem_type: { type: 'int32', id: 1 }, shape: { type: 'TensorShapeProto', id: 2 } },
            },
          },
        },
        OperatorSetIdProto: {
          fields: { domain: { type: 'string', id: 1 }, version: { type: 'int64', id: 2 } },
        },
      },
    },
  },
};

const ONNX_FLOAT = 1;
const ONNX_INT64 = 7;
const ATTR_INT = 2;

/** An ONNX model: `last_hidden_state = Gather(embeddings, input_ids)`; attention_mask and token_type_ids are declared, unused. */
export function gatherOnnxBytes(vocabSize: number, dim: number, matrix: Float32Array): Uint8Array {
  const root = protobuf.Root.fromJSON(ONNX_PROTO);
  const Model = root.lookupType('onnx.ModelProto');
  const tensorType = (elem: number, dims: Array<number | string>) => ({
    tensor_type: {
      elem_type: elem,
      shape: { dim: dims.map((d) => (typeof d === 'number' ? { dim_value: d } : { dim_param: d })) },
    },
  });
  const intInput = (name: string) => ({ name, type: tensorType(ONNX_INT64, ['batch_size', 'sequence_length']) });
  const message = Model.fromObject({
    ir_version: 8,
    producer_name: 'engram-test-fixture',
    opset_import: [{ domain: '', version: 17 }],
    graph: {
      name: 'gather_embeddings',
      node: [
        {
          input: ['embeddings', 'input_ids'],
          output: ['last_hidden_state'],
          name: 'gather',
          op_type: 'Gather',
          attribute: [{ name: 'axis', i: 0, type: ATTR_INT }],
        },
      ],
      initializer: [
        {
          name: 'embeddings',
          dims: [vocabSize, dim],
          data_type: ONNX_FLOAT,
          raw_data: Buffer.from(matrix.buffer, matrix.byteOffset, matrix.byteLength),
        },
      ],
      input: [intInput('input_ids'), intInput('attention_mask'), intInput('token_type_ids')],
      output: [{ name: 'last_hidden_state', type: tensorType(ONNX_FLOAT, ['batch_size', 'sequence_length', dim]) }],
    },
  });
  return Model.encode(message).finish();
}

/** Writes a transformers.js-loadable BERT-like folder: config.json, tokenizer.json, tokenizer_config.json, onnx/model.onnx. */
export function writeTransformersModel(dir: string, spec: FixtureModelSpec): string {
  fs.mkdirSync(path.join(dir, 'onnx'), { recursive: true });
  const { tokens, matrix } = fixtureMatrix(spec);
  fs.writeFileSync(
    path.join(dir, 'config.json'),
    JSON.stringify({
      model_type: 'bert',
      architectures: ['BertModel'],
      hidden_size: spec.dim,
      vocab_size: tokens.length,
      max_position_embeddings: 512,
      pad_token_id: 0,
    }),
  );
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(wordPieceTokenizerJson(tokens)));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(BERT_TOKENIZER_CONFIG));
  fs.writeFileSync(path.join(dir, 'onnx', 'model.onnx'), gatherOnnxBytes(tokens.length, spec.dim, matrix));
  return dir;
}

/** Topic groups for "related words score higher": each topic owns an axis, words are that axis plus a little noise. */
export const FIXTURE_TOPICS: Record<string, string[]> = {
  animals: ['cat', 'kitten', 'dog', 'puppy', 'pet'],
  food: ['pizza', 'pasta', 'bread', 'cheese', 'lunch'],
  code: ['python', 'typescript', 'compiler', 'function', 'bug'],
  weather: ['rain', 'snow', 'storm', 'sunny', 'cloud'],
};

/** A vocabulary with topic-shaped rows (dim ≥ number of topics) plus filler words with random rows. */
export function topicModelSpec(dim = 16, filler = 0): FixtureModelSpec {
  const topics = Object.values(FIXTURE_TOPICS);
  if (dim < topics.length) throw new Error(`dim must be at least ${topics.length}`);
  const vectors: Record<string, number[]> = {};
  topics.forEach((words, axis) =>
    words.forEach((w) => {
      const noise = randomRow(w, dim);
      vectors[w] = noise.map((n, i) => (i === axis ? 1 : 0) + 0.15 * n);
    }),
  );
  // Function words carry little meaning: small rows, so they blur but never dominate a sentence.
  const functionWords = ['the', 'my', 'a', 'likes', 'is', 'and'];
  for (const w of functionWords) vectors[w] = randomRow(w, dim).map((n) => 0.05 * n);
  const extra = Array.from({ length: filler }, (_, i) => `filler${i}`);
  return { vocab: [...topics.flat(), ...functionWords, ...extra], dim, vectors };
}
