// SPDX-License-Identifier: Apache-2.0
// Binary32 arithmetic of the packed presets (docs/codec.md §19), as integer
// rules: every operation is computed exactly on integers and rounded once to
// nearest-even, as IEEE 754 binary32 (subnormals included, no flush) does.
// Included inside a module body, after speckv_codec_fn.vh.

localparam integer PKW = 200;   // exact-value width: |x| < 2^17 on the 2^-149 grid fits

// (-1)^s * mag * 2^e0 rounded to binary32, RNE (overflow to infinity).
function automatic [31:0] pk_round32(input s, input [PKW-1:0] mag, input integer e0);
  integer p, k, sh, E;
  reg [PKW-1:0] q, rem, half;
  reg up;
  begin
    p = -1;
    for (k = 0; k < PKW; k = k + 1)
      if (mag[k]) p = k;
    if (p < 0) begin
      pk_round32 = {s, 31'd0};
    end else begin
      E = p + e0 + 127;
      sh = (E >= 1) ? p - 23 : -149 - e0;
      up = 1'b0;
      if (sh <= 0) begin
        q = mag << (-sh);
      end else if (sh >= PKW) begin
        q = {PKW{1'b0}};
        up = 1'b0;                       // mag < 2^PKW <= half
      end else begin
        q = mag >> sh;
        rem = mag & (({{(PKW-1){1'b0}}, 1'b1} << sh) - 1'b1);
        half = {{(PKW-1){1'b0}}, 1'b1} << (sh - 1);
        up = (rem > half) || (rem == half && q[0]);
      end
      q = q + {{(PKW-1){1'b0}}, up};
      if (E >= 1) begin
        if (q[24]) begin
          q = q >> 1;
          E = E + 1;
        end
        if (E >= 255) pk_round32 = {s, 8'hFF, 23'd0};
        else pk_round32 = {s, E[7:0], q[22:0]};
      end else begin
        pk_round32 = q[23] ? {s, 8'd1, q[22:0]} : {s, 8'd0, q[22:0]};   // rounded up to 2^-126, or subnormal
      end
    end
  end
endfunction

// Significand and exponent of the least significant bit of a finite binary32.
function automatic [23:0] pk_sig(input [31:0] u);
  begin
    pk_sig = (u[30:23] == 8'd0) ? {1'b0, u[22:0]} : {1'b1, u[22:0]};
  end
endfunction
function automatic integer pk_elsb(input [31:0] u);
  begin
    pk_elsb = (u[30:23] == 8'd0) ? -149 : $signed({1'b0, u[30:23]}) - 150;
  end
endfunction

// a - b, binary32 RNE, finite operands of magnitude < 2^17 (the caller's range).
function automatic [31:0] pk_sub32(input [31:0] a, input [31:0] b);
  reg [PKW:0] A, B, D;
  reg sb;
  begin
    A = {{(PKW+1-24){1'b0}}, pk_sig(a)} << (pk_elsb(a) + 149);
    B = {{(PKW+1-24){1'b0}}, pk_sig(b)} << (pk_elsb(b) + 149);
    sb = ~b[31];                          // a + (-b)
    if (A == 0 && B == 0) begin
      pk_sub32 = {a[31] & sb, 31'd0};
    end else if (a[31] == sb) begin
      D = A + B;
      pk_sub32 = pk_round32(a[31], D[PKW-1:0], -149);
    end else if (A >= B) begin
      D = A - B;
      pk_sub32 = pk_round32(D == 0 ? 1'b0 : a[31], D[PKW-1:0], -149);
    end else begin
      D = B - A;
      pk_sub32 = pk_round32(sb, D[PKW-1:0], -149);
    end
  end
endfunction

// a * b, binary32 RNE, finite operands.
function automatic [31:0] pk_mul32(input [31:0] a, input [31:0] b);
  reg [47:0] m;
  begin
    m = pk_sig(a) * pk_sig(b);
    pk_mul32 = pk_round32(a[31] ^ b[31], {{(PKW-48){1'b0}}, m}, pk_elsb(a) + pk_elsb(b));
  end
endfunction

// a / b, binary32 RNE, finite a, finite non-zero b.
function automatic [31:0] pk_div32(input [31:0] a, input [31:0] b);
  reg [87:0] num, q, r;
  reg [23:0] mb;
  begin
    mb = pk_sig(b);
    num = {40'd0, pk_sig(a)} << 60;
    q = num / {64'd0, mb};
    r = num % {64'd0, mb};
    if (pk_sig(a) == 24'd0) pk_div32 = {a[31] ^ b[31], 31'd0};
    else pk_div32 = pk_round32(a[31] ^ b[31], {{(PKW-89){1'b0}}, q, r != 0}, pk_elsb(a) - pk_elsb(b) - 61);
  end
endfunction

// §19.2: binary32 -> binary16 rounded toward +inf (up = 1) or -inf (up = 0).
function automatic [15:0] pk_f16_dir(input [31:0] u, input up);
  reg [30:0] a;
  reg [31:0] h, rem, m;
  reg [7:0] sh;
  begin
    a = u[30:0];
    if (a >= 31'h38800000) begin
      h = {14'd0, a[30:23] - 8'd112, 10'd0} | {22'd0, a[22:13]};
      rem = {19'd0, a[12:0]};
    end else if (a >= 31'h00800000) begin
      m = {8'd0, 1'b1, a[22:0]};
      sh = 8'd126 - a[30:23];
      h = (sh >= 8'd32) ? 32'd0 : m >> sh;
      rem = (sh >= 8'd32) ? m : m & ((32'd1 << sh) - 32'd1);
    end else begin
      h = 32'd0;
      rem = {1'b0, a};
    end
    if (rem != 32'd0 && (up != u[31])) h = h + 32'd1;
    pk_f16_dir = {u[31], h[14:0]};
  end
endfunction

// §19.3: clamp(round_half_even(t), 0, qmax) of a binary32 t.
function automatic [7:0] pk_qround(input [31:0] t, input [7:0] qmax);
  reg [23:0] m;
  reg [31:0] r, rem, half;
  reg [7:0] sh;
  begin
    m = {1'b1, t[22:0]};
    if (t[31] || t[30:23] < 8'd126) begin
      pk_qround = 8'd0;                   // negative, zero or below 1/2
    end else if (t[30:23] >= 8'd150) begin
      pk_qround = qmax;                   // >= 2^23
    end else begin
      sh = 8'd150 - t[30:23];             // 1 .. 24
      r = {8'd0, m} >> sh;
      rem = {8'd0, m} & ((32'd1 << sh) - 32'd1);
      half = 32'd1 << (sh - 8'd1);
      if (rem > half || (rem == half && r[0])) r = r + 32'd1;
      pk_qround = (r >= {24'd0, qmax}) ? qmax : r[7:0];
    end
  end
endfunction

// §19.5: fma(q, sf, zf) as binary32 (one rounding) from the FP16 fields
// (s16 sign 0, neither field with exponent 31: the decoder checked).
function automatic [31:0] pk_fma(input [7:0] q, input [15:0] s16, input [15:0] z16);
  reg [10:0] ms, mz;
  reg [4:0] es, ez;
  reg [63:0] P, Z, S;
  begin
    es = s16[14:10];
    ez = z16[14:10];
    ms = (es == 5'd0) ? {1'b0, s16[9:0]} : {1'b1, s16[9:0]};
    mz = (ez == 5'd0) ? {1'b0, z16[9:0]} : {1'b1, z16[9:0]};
    // units of 2^-24: a normal field's lsb is 2^(e - 25), a subnormal's 2^-24
    P = ({45'd0, q} * {53'd0, ms}) << ((es == 5'd0) ? 5'd0 : es - 5'd1);
    Z = {53'd0, mz} << ((ez == 5'd0) ? 5'd0 : ez - 5'd1);
    if (!z16[15]) pk_fma = pk_round32(1'b0, {{(PKW-64){1'b0}}, P + Z}, -24);
    else if (P >= Z) pk_fma = pk_round32(1'b0, {{(PKW-64){1'b0}}, P - Z}, -24);
    else pk_fma = pk_round32(1'b1, {{(PKW-64){1'b0}}, Z - P}, -24);
  end
endfunction
