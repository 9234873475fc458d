// SPDX-License-Identifier: Apache-2.0
// Shared combinational functions of the speckv codec RTL (docs/codec.md).
// Included inside a module body (needs the module's BB localparam for crc_upd).
// Every function is the integer rule of the section it cites; nothing here
// is floating point.

// §2: FP16 bit pattern -> canonical binary32 pattern (exact).
function automatic [31:0] fp16_to_u32(input [15:0] h);
  reg [4:0] e;
  reg [9:0] f, fs;
  reg [3:0] p;
  integer k;
  begin
    e = h[14:10];
    f = h[9:0];
    p = 4'd0;
    for (k = 0; k < 10; k = k + 1)
      if (f[k]) p = k[3:0];
    fs = f << (4'd10 - p);
    if (e == 5'd31)
      fp16_to_u32 = {h[15], 8'hFF, f, 13'd0};
    else if (e == 5'd0 && f == 10'd0)
      fp16_to_u32 = {h[15], 31'd0};
    else if (e == 5'd0)
      fp16_to_u32 = {h[15], {4'd0, p} + 8'd103, fs, 13'd0};
    else
      fp16_to_u32 = {h[15], {3'd0, e} + 8'd112, f, 13'd0};
  end
endfunction

// §2: element j of a beat (dtype 1 FP16, 2 BF16, 3 FP32) -> canonical pattern.
function automatic [31:0] canon_elem(input [7:0] dtype, input [31:0] raw32);
  begin
    case (dtype)
      8'd1:    canon_elem = fp16_to_u32(raw32[15:0]);
      8'd2:    canon_elem = {raw32[15:0], 16'd0};
      default: canon_elem = raw32;
    endcase
  end
endfunction

// §3.3: one element -> q (two's complement byte), scale exponent es, reciprocal r.
function automatic [7:0] quant_one(input [31:0] u, input [7:0] es, input [15:0] r,
                                   input [7:0] qmax);
  reg [7:0] E;
  reg [15:0] M;
  reg [31:0] P, rr;
  reg [9:0] sh;     // 30 + es - E, signed in 10 bits
  reg [31:0] mag;
  begin
    E = u[30:23];
    M = {1'b1, u[22:8]};
    P = M * r;
    sh = 10'd30 + {2'd0, es} - {2'd0, E};
    if (sh[9] || sh >= 10'd32) rr = 32'd0;
    else rr = P >> sh[4:0];
    mag = (rr + 32'd1) >> 1;
    if (mag > {24'd0, qmax}) mag = {24'd0, qmax};
    if (E == 8'd0 || r == 16'd0) quant_one = 8'd0;
    else if (u[31]) quant_one = 8'd0 - mag[7:0];
    else quant_one = mag[7:0];
  end
endfunction

// §3.4: exact binary32 pattern of q * S (S = BF16 scale field); 0 if q or S is 0.
function automatic [31:0] dequant_bits(input [7:0] q, input [15:0] scale);
  reg [7:0] mq, Ms, Es;
  reg [14:0] v;
  reg [3:0] p;
  reg [22:0] frac;
  reg [37:0] vs;
  integer k;
  begin
    mq = q[7] ? (8'd0 - q) : q;
    Ms = {1'b1, scale[6:0]};
    Es = scale[14:7];
    v = mq * Ms;
    p = 4'd0;
    for (k = 0; k < 15; k = k + 1)
      if (v[k]) p = k[3:0];
    vs = {23'd0, v} << (5'd23 - {1'b0, p});
    frac = vs[22:0];
    if (q == 8'd0 || scale == 16'd0) dequant_bits = 32'd0;
    else dequant_bits = {q[7], Es - 8'd7 + {4'd0, p}, frac};
  end
endfunction

// §3.4: finite binary32 pattern -> FP16, RNE, saturating at +-65504.
function automatic [15:0] fp32_to_fp16_sat(input [31:0] u);
  reg [15:0] sgn;
  reg [30:0] a;
  reg [31:0] r, m, rem, half, t;
  reg [7:0] E;
  reg [4:0] sh;
  begin
    sgn = {u[31], 15'd0};
    a = u[30:0];
    E = a[30:23];
    if (a >= 31'h477FF000) begin
      fp32_to_fp16_sat = sgn | 16'h7BFF;
    end else if (a >= 31'h38800000) begin
      r = ({1'b0, a} + 32'hFFF + {31'd0, a[13]}) >> 13;
      t = r - (32'd112 << 10);
      fp32_to_fp16_sat = sgn | t[15:0];
    end else if (a < 31'h33000000) begin
      fp32_to_fp16_sat = sgn;
    end else begin
      m = {8'd0, 1'b1, a[22:0]};
      sh = 8'd126 - E;                       // 14..24
      half = 32'd1 << (sh - 5'd1);
      rem = m & ((32'd1 << sh) - 32'd1);
      r = m >> sh;
      if (rem > half || (rem == half && r[0])) r = r + 32'd1;
      fp32_to_fp16_sat = sgn | r[15:0];
    end
  end
endfunction

// §3.4: finite binary32 pattern -> BF16, RNE.
function automatic [15:0] fp32_to_bf16(input [31:0] u);
  reg [31:0] t;
  begin
    t = u + 32'h7FFF + {31'd0, u[16]};
    fp32_to_bf16 = t[31:16];
  end
endfunction

// CRC32C register (reflected 0x82F63B78, no init / final xor here) over the
// first m bytes of w, byte 0 first.
function automatic [31:0] crc_upd(input [31:0] s, input [BB*8-1:0] w, input [7:0] m);
  reg [31:0] c;
  integer i, k;
  begin
    c = s;
    for (i = 0; i < BB; i = i + 1)
      if (i < m) begin
        c = c ^ {24'd0, w[i*8 +: 8]};
        for (k = 0; k < 8; k = k + 1)
          c = c[0] ? ((c >> 1) ^ 32'h82F63B78) : (c >> 1);
      end
    crc_upd = c;
  end
endfunction

// Product of two elements of GF(2)[x] / CRC32C polynomial, reflected
// representation (x^0 = bit 31): advancing a CRC register over L zero bytes
// is gf_mul(register, x^(8L)). Same as zlib's multmodp.
function automatic [31:0] gf_mul(input [31:0] a, input [31:0] b);
  reg [31:0] p, bb;
  integer i;
  begin
    p = 32'd0;
    bb = b;
    for (i = 31; i >= 0; i = i - 1) begin
      if (a[i]) p = p ^ bb;
      bb = bb[0] ? ((bb >> 1) ^ 32'h82F63B78) : (bb >> 1);
    end
    gf_mul = p;
  end
endfunction
