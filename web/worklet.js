// AudioWorklet: mono float input at the context's rate -> 16 kHz pcm_s16le chunks of ~100 ms,
// low-pass filtered before decimation so nothing above 8 kHz folds back. Also reports the level.
class Pcm16kProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.ratio = sampleRate / 16000;
    // windowed-sinc low-pass at 7.6 kHz (relative to the input rate), 32 taps each side
    const half = Math.ceil(16 * Math.max(1, this.ratio));
    const fc = Math.min(1, 16000 / sampleRate) * 0.95;
    this.half = half;
    this.kernel = new Float32Array(2 * half);
    for (let i = 0; i < 2 * half; i++) {
      const d = i - half + 0.5;
      const sinc = d === 0 ? 1 : Math.sin(Math.PI * fc * d) / (Math.PI * fc * d);
      const w = 0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / (2 * half));
      this.kernel[i] = fc * sinc * w;
    }
    this.hist = new Float32Array(0);
    this.pos = 0; // position of the next output sample, in input samples from hist[0]
    this.out = [];
    this.sumSq = 0;
    this.count = 0;
  }

  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const ch = input[0];
    const merged = new Float32Array(this.hist.length + ch.length);
    merged.set(this.hist);
    merged.set(ch, this.hist.length);
    const k = this.kernel, half = this.half;
    while (this.pos + half < merged.length) {
      const c = Math.floor(this.pos);
      let acc = 0;
      for (let j = 0; j < 2 * half; j++) {
        const idx = c - half + 1 + j;
        if (idx >= 0) acc += merged[idx] * k[j];
      }
      const v = Math.max(-1, Math.min(1, acc * (this.ratio >= 1 ? 1 : 1)));
      this.out.push(v);
      this.sumSq += v * v;
      this.count++;
      this.pos += this.ratio;
    }
    const keep = Math.max(0, Math.floor(this.pos) - half);
    this.hist = merged.slice(keep);
    this.pos -= keep;
    if (this.out.length >= 1600) {
      const pcm = new Int16Array(this.out.length);
      for (let i = 0; i < this.out.length; i++) pcm[i] = Math.round(this.out[i] * 32767);
      const rms = Math.sqrt(this.sumSq / Math.max(1, this.count));
      this.port.postMessage({ pcm: pcm.buffer, rms }, [pcm.buffer]);
      this.out = [];
      this.sumSq = 0;
      this.count = 0;
    }
    return true;
  }
}
registerProcessor("pcm16k", Pcm16kProcessor);
